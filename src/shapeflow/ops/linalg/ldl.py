"""The LDL^T factorization of symmetric matrices with Bunch-Kaufman pivoting, as LAPACK's
sytrf (lower triangle): D has 1x1 and 2x2 blocks, pivots are 1-based and negative for a 2x2
block; and solving with it (sytrs). PyTorch defines no derivatives for either.

The pivot choice of each step depends on the matrix, so the kernels loop over the batch and
the columns on the device's array namespace.
"""

from __future__ import annotations

import math
from collections import namedtuple

from ... import dtypes as _dt
from ...errors import DTypeError, GraphError, ShapeError
from ...shape import broadcast_shapes
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..registry import public
from ._common import check_matrix, raise_on_info

LDLFactorResult = namedtuple("linalg_ldl_factor", ["LD", "pivots"])
LDLFactorExResult = namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
_ALPHA = (1 + math.sqrt(17)) / 8  # Bunch-Kaufman's growth bound


def _swap_symmetric(xp, a, k: int, i: int, j: int) -> None:
    """Rows and columns i and j of the trailing symmetric block a[k:, k:] (stored in full)."""
    order = xp.arange(a.shape[0])
    order[i], order[j] = j, i
    rest = order[k:] - k
    a[k:, k:] = a[k:, k:][rest][:, rest]


def _sytf2(xp, a):
    """(LD, pivots, info) of one symmetric matrix (its lower triangle is read), LAPACK's
    unblocked dsytf2 step by step, on the full symmetric matrix."""
    n = a.shape[0]
    a = xp.tril(a) + xp.swapaxes(xp.tril(a, -1), 0, 1)
    piv = xp.zeros((n,), xp.int32)
    info, k = 0, 0
    while k < n:
        step, absakk = 1, abs(a[k, k])
        imax, colmax = k, 0.0
        if k + 1 < n:
            imax = k + 1 + int(xp.argmax(abs(a[k + 1:, k])))
            colmax = abs(a[imax, k])
        if max(absakk, colmax) == 0 or absakk != absakk:  # a zero (or NaN) column: no step
            info = info or k + 1
            piv[k] = k + 1
            k += 1
            continue
        kp = k
        if absakk < _ALPHA * colmax:
            # the largest off-diagonal entry of row/column imax
            rowmax = abs(a[imax, k:imax]).max()
            if imax + 1 < n:
                rowmax = max(rowmax, abs(a[imax + 1:, imax]).max())
            if absakk >= _ALPHA * colmax * (colmax / rowmax):
                kp = k
            elif abs(a[imax, imax]) >= _ALPHA * rowmax:
                kp = imax
            else:
                kp, step = imax, 2
        last = k + step - 1
        if kp != last:
            _swap_symmetric(xp, a, k, last, kp)
        if step == 1:
            x = a[k + 1:, k].copy()
            a[k + 1:, k + 1:] -= x[:, None] * x[None, :] / a[k, k]
            a[k + 1:, k] = x / a[k, k]
            a[k, k + 1:] = a[k + 1:, k]
            piv[k] = kp + 1
        else:
            x = a[k + 2:, k:k + 2].copy()
            w = x @ xp.linalg.inv(a[k:k + 2, k:k + 2])  # the two columns of L: X D^-1
            a[k + 2:, k + 2:] -= w @ xp.swapaxes(x, 0, 1)
            a[k + 2:, k:k + 2] = w
            a[k:k + 2, k + 2:] = xp.swapaxes(w, 0, 1)
            piv[k] = piv[k + 1] = -(kp + 1)
        k += step
    return xp.tril(a), piv, info


def ldl_kernel(xp, a):
    """(LD, pivots int32, info int32) of a [..., n, n] array."""
    batch, n = a.shape[:-2], a.shape[-1]
    size = math.prod(batch)
    flat = a.reshape((size, n, n))
    ld = xp.zeros_like(flat)
    piv = xp.zeros((size, n), xp.int32)
    info = xp.zeros((size,), xp.int32)
    with xp.errstate(all="ignore"):
        for b in range(size):
            ld[b], piv[b], info[b] = _sytf2(xp, flat[b].copy())
    return ld.reshape(a.shape), piv.reshape(batch + (n,)), info.reshape(batch)


class LDLFactor(Op):
    """LD (L's strict lower part and D's blocks); pivots and info are side outputs."""

    name = "linalg.ldl_factor_ex"

    def infer(self, a):
        check_matrix(self.name, a)
        return a.shape, a.dtype

    def forward(self, a):
        ld, self.pivots_out, self.info_out = ldl_kernel(self.device.xp, a)
        return ld

    def backward(self, g):
        raise GraphError("the derivative for linalg.ldl_factor_ex is not implemented (as in "
                         "PyTorch)", op=self.name)


def _factor(A: Tensor, hermitian: bool):  # noqa: N803
    op = LDLFactor()
    ld = apply(op, A)
    batch = tuple(A.shape[:-2])
    pivots = Tensor._make(op.__dict__.pop("pivots_out", None), batch + (A.shape[-1],),
                          _dt.int32, A.device)
    info = Tensor._make(op.__dict__.pop("info_out", None), batch, _dt.int32, A.device)
    return ld, pivots, info


def _raise_on_info(op: str, info: Tensor) -> None:
    raise_on_info(op, info, "D", "exactly zero: the factorization is complete but D is "
                  "singular", "linalg.ldl_factor_ex")


@public(sf=False, linalg=True)
def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False):  # noqa: N803
    """(LD, pivots, info): A = P L D L^T P^T as LAPACK's sytrf keeps it (real symmetric A:
    hermitian changes nothing); info is the 1-based index of a zero block of D (0: none)."""
    ld, pivots, info = _factor(A, hermitian)
    if check_errors:
        _raise_on_info("linalg.ldl_factor_ex", info)
    return LDLFactorExResult(ld, pivots, info)


@public(sf=False, linalg=True)
def ldl_factor(A: Tensor, *, hermitian: bool = False):  # noqa: N803
    """(LD, pivots) of symmetric A with Bunch-Kaufman pivoting; LinAlgError where D is
    singular."""
    ld, pivots, info = _factor(A, hermitian)
    _raise_on_info("linalg.ldl_factor", info)
    return LDLFactorResult(ld, pivots)


def _sytrs(xp, ld, piv, b):
    """X with A X = B for one factored matrix (LAPACK's dsytrs, lower): P L D L^T P^T."""
    n = ld.shape[0]
    x = b.copy()

    def swap(i: int, j: int) -> None:
        if i != j:
            x[[i, j]] = x[[j, i]]

    k = 0
    while k < n:  # L D Y = P^T B, one block at a time
        if piv[k] > 0:
            swap(k, int(piv[k]) - 1)
            x[k + 1:] -= ld[k + 1:, k][:, None] * x[k][None, :]
            x[k] /= ld[k, k]
            k += 1
        else:
            swap(k + 1, -int(piv[k]) - 1)
            x[k + 2:] -= ld[k + 2:, k:k + 2] @ x[k:k + 2]
            d = xp.stack([xp.stack([ld[k, k], ld[k + 1, k]]),
                          xp.stack([ld[k + 1, k], ld[k + 1, k + 1]])])
            x[k:k + 2] = xp.linalg.solve(d, x[k:k + 2])
            k += 2
    k = n - 1
    while k >= 0:  # L^T P^T X = Y, back from the last block
        if piv[k] > 0:
            x[k] -= ld[k + 1:, k] @ x[k + 1:]
            swap(k, int(piv[k]) - 1)
            k -= 1
        else:
            x[k - 1:k + 1] -= xp.swapaxes(ld[k + 1:, k - 1:k + 1], 0, 1) @ x[k + 1:]
            swap(k, -int(piv[k]) - 1)
            k -= 2
    return x


class LDLSolve(Op):
    """X with A X = B from ldl_factor's (LD, pivots); batch dims broadcast."""

    name = "linalg.ldl_solve"

    def infer(self, ld, pivots, b):
        check_matrix(self.name, ld)
        if b.ndim < 2:
            raise ShapeError(f"{self.name}: B must have at least 2 dimensions, got "
                             f"{describe(b)}", op=self.name, operands=[("B", describe(b))])
        if b.dtype is not ld.dtype:
            raise DTypeError(f"{self.name}: Expected B and LD to have the same dtype, but "
                             f"found B of type {b.dtype} and LD of type {ld.dtype} instead",
                             op=self.name,
                             operands=[("LD", describe(ld)), ("B", describe(b))])
        if pivots.dtype not in (_dt.int32, _dt.int64):
            raise DTypeError(f"{self.name}: pivots must be int32 (as ldl_factor gives them), "
                             f"got {pivots.dtype}", op=self.name,
                             operands=[("pivots", describe(pivots))])
        if tuple(pivots.shape) != tuple(ld.shape[:-1]):
            raise ShapeError(f"{self.name}: Expected LD.shape[:-1] and pivots.shape to be the "
                             f"same, but got pivots with shape {list(pivots.shape)} instead",
                             op=self.name,
                             operands=[("LD", describe(ld)), ("pivots", describe(pivots))])
        n = ld.shape[-1]
        if b.shape[-2] != n:
            raise ShapeError(f"{self.name}: each A matrix is {n} by {n} but each B matrix is "
                             f"{b.shape[-2]} by {b.shape[-1]}", op=self.name,
                             operands=[("LD", describe(ld)), ("B", describe(b))])
        batch = broadcast_shapes(tuple(ld.shape[:-2]), tuple(b.shape[:-2]), self.name,
                                 ("LD", "B"))
        return tuple(batch) + tuple(b.shape[-2:]), b.dtype

    def forward(self, ld, pivots, b):
        xp = self.device.xp
        batch = xp.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
        n, k = ld.shape[-1], b.shape[-1]
        size = math.prod(batch)
        lds = xp.broadcast_to(ld, batch + (n, n)).reshape((size, n, n))
        pivs = xp.broadcast_to(pivots, batch + (n,)).reshape((size, n))
        bs = xp.broadcast_to(b, batch + (n, k)).reshape((size, n, k))
        out = xp.empty((size, n, k), b.dtype)
        with xp.errstate(all="ignore"):
            for i in range(size):
                out[i] = _sytrs(xp, lds[i], pivs[i], bs[i])
        return out.reshape(batch + (n, k))

    def backward(self, g):
        raise GraphError("the derivative for linalg.ldl_solve is not implemented (as in "
                         "PyTorch)", op=self.name)


@public(sf=False, linalg=True)
def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False) -> Tensor:  # noqa: N803
    """X with A X = B from (LD, pivots) = linalg.ldl_factor(A); B a (batch of) matrices."""
    return apply(LDLSolve(), LD, pivots, B)
