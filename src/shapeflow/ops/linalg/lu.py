"""LU factorization with partial pivoting, as LAPACK's getrf (1-based int32 pivots): the
packed factor, its unpacking into P, L, U, and solving with it; PyTorch's gradients.

NumPy has no LU, so the factorization is written over the device's array namespace: one
step per column, vectorized over the batch.
"""

from __future__ import annotations

import math
from collections import namedtuple

from ... import dtypes as _dt
from ...errors import ShapeError
from ...tensor import Tensor, describe
from ..base import OUT, Op, Saved, apply
from ..registry import public
from ._common import check_float, check_matrix, raise_on_info
from .inverse import Solve

LUFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LUResult = namedtuple("linalg_lu", ["P", "L", "U"])
LUUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])
LUWithInfoResult = namedtuple("_lu_with_info", ["LU", "pivots", "info"])


def lu_kernel(xp, a):
    """(LU, pivots, perm, info) of a [..., m, n] array: LU packs the unit lower L (below the
    diagonal) and U; pivots[j] is the 1-based row swapped with row j; perm the final row
    order (A[perm] = L U); info the 1-based column of the first zero pivot, else 0."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k, size = min(m, n), math.prod(batch)
    lu = a.reshape((size, m, n)).copy()
    pivots = xp.zeros((size, k), xp.int32)
    perm = xp.broadcast_to(xp.arange(m), (size, m)).copy()
    info = xp.zeros((size,), xp.int32)
    rows = xp.arange(size)
    with xp.errstate(all="ignore"):  # inf / nan inputs propagate as LAPACK's do
        for j in range(k):
            # the first largest |entry| of the column, as LAPACK's idamax picks it
            p = xp.argmax(xp.abs(lu[:, j:, j]), axis=1) + j
            pivots[:, j] = p + 1
            for arr in (lu, perm):
                top = arr[rows, j].copy()
                arr[rows, j] = arr[rows, p]
                arr[rows, p] = top
            d = lu[:, j, j]
            zero = d == 0
            info = xp.where((info == 0) & zero, j + 1, info).astype(xp.int32)
            # a zero pivot has a zero column below it: it stays as it is
            lu[:, j + 1:, j] /= xp.where(zero, 1, d)[:, None]
            lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j:j + 1] * lu[:, j:j + 1, j + 1:]
    return (lu.reshape(a.shape), pivots.reshape(batch + (k,)), perm.reshape(batch + (m,)),
            info.reshape(batch))


class LUFactor(Op):
    """The packed LU factor of A (P^T A = L U); pivots and info are side outputs."""

    name = "linalg.lu_factor"

    def infer(self, a):
        check_matrix(self.name, a, square=False)
        m, n = a.shape[-2], a.shape[-1]
        self.batch, self.mn = tuple(a.shape[:-2]), (m, n)
        return a.shape, a.dtype

    def saved(self, a, out):
        return (OUT, Saved.new("perm", self.batch + (self.mn[0],), _dt.int64))

    def forward(self, a):
        lu, pivots, perm, info = lu_kernel(self.device.xp, a)
        self.perm = perm.astype(self.device.xp.int64)  # backward's
        self.pivots_out, self.info_out = pivots, info
        return lu

    def backward(self, g):
        packed, perm = self.saved_tensors
        m, n = self.mn
        k = min(m, n)
        low, up = unit_lower(packed), packed[..., :k, :].triu()
        gl, gu = g[..., :, :k].tril(-1), g[..., :k, :].triu()
        return (permutation_matrix(perm, packed.dtype) @ _lu_backward(low, up, gl, gu),)


def _lu_backward(low: Tensor, up: Tensor, gl: Tensor, gu: Tensor) -> Tensor:
    """The gradient of P^T A for P^T A = L U (L [m, k] unit lower, U [k, n] upper).

    With L = [L1; L2], U = [U1 | U2] (L1, U1 square) and X = L1^-1 d(P^T A)_11 U1^-1, dL1 =
    L1 tril_-1(X), dU1 = triu(X) U1, and the rest of the blocks follow by substitution:
    d(P^T A) = [L1^-T M U1^-T, L1^-T gU2; gL2 U1^-T, 0] with
    M = tril_-1(L1^T gL1 - gU2 U2^T) + triu(gU1 U1^T - L2^T gL2).
    """
    from ..movement import cat

    m, k, n = low.shape[-2], low.shape[-1], up.shape[-1]
    l1, u1 = low[..., :k, :], up[..., :, :k]
    low_part = l1.mT @ gl[..., :k, :]
    up_part = gu[..., :, :k] @ u1.mT
    if n > k:
        low_part = low_part - gu[..., :, k:] @ up[..., :, k:].mT
    if m > k:
        up_part = up_part - low[..., k:, :].mT @ gl[..., k:, :]
    mid = low_part.tril(-1) + up_part.triu()
    top = _right_solve_t(apply(Solve(), l1.mT, mid), u1)  # L1^-T M U1^-T
    if n > k:
        top = cat([top, apply(Solve(), l1.mT, gu[..., :, k:])], -1)
    if m > k:
        top = cat([top, _right_solve_t(gl[..., k:, :], u1)], -2)  # n == k here
    return top


def _right_solve_t(x: Tensor, u: Tensor) -> Tensor:
    """x U^-T (as solve(U, x^T)^T)."""
    return apply(Solve(), u, x.mT).mT


def unit_lower(packed: Tensor) -> Tensor:
    """L [.., m, k] of a packed LU: its strict lower part with ones on the diagonal."""
    from ...factories import eye

    m, n = packed.shape[-2], packed.shape[-1]
    k = min(m, n)
    return packed[..., :, :k].tril(-1) + eye(m, k, dtype=packed.dtype, device=packed.device)


def permutation_matrix(perm: Tensor, dtype) -> Tensor:
    """P [.., m, m] with P[perm[i], i] = 1 (so that P^T A = A[perm])."""
    from ...factories import arange

    m = perm.shape[-1]
    rows = arange(m, device=perm.device).unsqueeze(-1)
    return (perm.unsqueeze(-2) == rows).to(dtype)


class PivotsToPermutation(Op):
    """The row order (int64 [.., m]) that LAPACK's 1-based pivots swap into."""

    name = "lu_unpack"
    differentiable = False

    def __init__(self, m: int) -> None:
        self.m = m

    def infer(self, pivots):
        if pivots.dtype is not _dt.int32:
            raise ShapeError(f"{self.name}: pivots must be int32 (as linalg.lu_factor gives "
                             f"them), got {pivots.dtype}", op=self.name,
                             operands=[("pivots", describe(pivots))])
        if pivots.ndim < 1 or pivots.shape[-1] > self.m:
            raise ShapeError(f"{self.name}: expected pivots [*, k] with k <= {self.m}, got "
                             f"{describe(pivots)}", op=self.name,
                             operands=[("pivots", describe(pivots))])
        return tuple(pivots.shape[:-1]) + (self.m,), _dt.int64

    def forward(self, pivots):
        xp = self.device.xp
        batch, k = pivots.shape[:-1], pivots.shape[-1]
        size = math.prod(batch)
        flat = pivots.reshape((size, k)).astype(xp.int64) - 1
        if size and k and (flat.min() < 0 or flat.max() >= self.m):
            raise ShapeError(f"{self.name}: pivots must be between 1 and {self.m}", op=self.name)
        perm = xp.broadcast_to(xp.arange(self.m), (size, self.m)).copy()
        rows = xp.arange(size)
        for j in range(k):  # the swaps in the order getrf made them
            p = flat[:, j]
            top = perm[rows, j].copy()
            perm[rows, j] = perm[rows, p]
            perm[rows, p] = top
        return perm.reshape(batch + (self.m,))


def _check_pivot(op: str, pivot: bool) -> None:
    if not pivot:
        raise ShapeError(f"{op}: LU without pivoting is not implemented on the CPU", op=op,
                         hint="use pivot=True")


def _factor(op_name: str, a: Tensor):
    op = LUFactor()
    lu = apply(op, a)
    m, n = a.shape[-2], a.shape[-1]
    batch = tuple(a.shape[:-2])
    pivots = Tensor._make(op.__dict__.pop("pivots_out", None), batch + (min(m, n),),
                          _dt.int32, a.device)
    info = Tensor._make(op.__dict__.pop("info_out", None), batch, _dt.int32, a.device)
    return lu, pivots, info


def _raise_on_info(op: str, info: Tensor, what: str) -> None:
    raise_on_info(op, info, "U", f"zero {what}", "linalg.lu_factor_ex")


@public(sf=False, linalg=True)
def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False):  # noqa: N803
    """(LU, pivots, info): A = P L U packed as LAPACK's getrf; info is the 1-based index of
    the first zero on U's diagonal (0: none)."""
    _check_pivot("linalg.lu_factor_ex", pivot)
    lu, pivots, info = _factor("linalg.lu_factor_ex", A)
    if check_errors:
        _raise_on_info("linalg.lu_factor_ex", info, "(the matrix is singular)")
    return LUFactorExResult(lu, pivots, info)


@public(sf=False, linalg=True)
def lu_factor(A: Tensor, *, pivot: bool = True):  # noqa: N803
    """(LU, pivots) of A = P L U; LinAlgError where U has a zero on its diagonal."""
    _check_pivot("linalg.lu_factor", pivot)
    lu, pivots, info = _factor("linalg.lu_factor", A)
    _raise_on_info("linalg.lu_factor", info, "and using it on lu_solve would divide by zero")
    return LUFactorResult(lu, pivots)


@public(method=True)
def lu(A: Tensor, pivot: bool = True, get_infos: bool = False):  # noqa: N803
    """torch.lu: (LU, pivots), with info too when get_infos (else singular input raises)."""
    _check_pivot("lu", pivot)
    lu_, pivots, info = _factor("lu", A)
    if get_infos:
        return LUWithInfoResult(lu_, pivots, info)
    _raise_on_info("lu", info, "(the matrix is singular)")
    return lu_, pivots


def _empty(like: Tensor) -> Tensor:
    from ...factories import zeros

    return zeros(0, dtype=like.dtype, device=like.device)


@public()
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,  # noqa: N803
              unpack_pivots: bool = True):
    """(P, L, U) of a packed LU; empty tensors for the parts not asked for."""
    check_matrix("lu_unpack", LU_data, square=False)
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    if unpack_pivots:
        if tuple(LU_pivots.shape[:-1]) != tuple(LU_data.shape[:-2]) or (
                LU_pivots.ndim and LU_pivots.shape[-1] != k):
            raise ShapeError(f"lu_unpack: pivots must have shape [*batch, {k}] for LU "
                             f"{describe(LU_data)}, got {describe(LU_pivots)}", op="lu_unpack")
        perm = apply(PivotsToPermutation(m), LU_pivots)
        p = permutation_matrix(perm, LU_data.dtype)
    else:
        p = _empty(LU_data)
    if not unpack_data:
        return LUUnpackResult(p, _empty(LU_data), _empty(LU_data))
    return LUUnpackResult(p, unit_lower(LU_data), LU_data[..., :k, :].triu())


@public(sf=False, linalg="lu")
def linalg_lu(A: Tensor, *, pivot: bool = True):  # noqa: N803
    """(P, L, U) with A = P L U: P a permutation, L unit lower [m, k], U upper [k, n]."""
    _check_pivot("linalg.lu", pivot)
    packed, pivots, _ = _factor("linalg.lu", A)
    return LUResult(*lu_unpack(packed, pivots))


@public(sf=False, linalg="lu_solve")
def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True,  # noqa: N803
                    adjoint: bool = False) -> Tensor:
    """X with A X = B (left) or X A = B, A^T in place of A when adjoint, A = P L U given as
    linalg.lu_factor's (LU, pivots); batch dims broadcast."""
    op = "linalg.lu_solve"
    check_matrix(op, LU)
    check_float(op, B)
    if B.ndim < 2:
        raise ShapeError(f"{op}: B must have at least 2 dimensions, got {describe(B)}", op=op)
    n = LU.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ShapeError(f"{op}: B's {'rows' if left else 'columns'} must match A's size {n}, "
                         f"got {describe(B)}", op=op,
                         operands=[("LU", describe(LU)), ("B", describe(B))])
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return linalg_lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    p = lu_unpack(LU, pivots, unpack_data=False).P
    low, up = unit_lower(LU), LU.triu()
    if adjoint:  # A^T X = B: X = P L^-T U^-T B
        return p @ apply(Solve(), low.mT, apply(Solve(), up.mT, B))
    return apply(Solve(), up, apply(Solve(), low, p.mT @ B))


@public(sf=True, method=True)
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:  # noqa: N803
    """torch.lu_solve: X with A X = b, A given as torch.lu's (LU_data, LU_pivots)."""
    return linalg_lu_solve(LU_data, LU_pivots, b)
