"""The `_ex` factorizations: cholesky_ex, inv_ex, solve_ex return LAPACK's info code (int32
per matrix, 0 when it succeeded) beside the result instead of raising."""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...tensor import Tensor
from ..base import apply
from ..registry import public
from ._common import LinAlgError, check_matrix
from .decompositions import Cholesky
from .inverse import Inv, Solve
from .lu import lu_kernel

CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])
InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])


def _cholesky_columns(xp, a):
    """(L, info) of [B, n, n] arrays by LAPACK's unblocked column algorithm (potf2), reading
    the lower triangle: where a leading minor j is not positive-definite, info = j, L[j, j]
    keeps the non-positive value and the later columns stay as A's (as LAPACK leaves them)."""
    size, n = a.shape[0], a.shape[-1]
    low = xp.tril(a).copy()
    info = xp.zeros((size,), xp.int32)
    active = xp.ones((size,), bool)
    with xp.errstate(all="ignore"):
        for j in range(n):
            row = low[:, j, :j]
            d = a[:, j, j] - (row * row).sum(-1)
            bad = active & ~(d > 0)  # NaN counts as not positive, as in LAPACK
            info = xp.where(bad, j + 1, info).astype(xp.int32)
            active = active & ~bad
            root = xp.sqrt(xp.where(active, d, 1.0))
            low[:, j, j] = xp.where(active, root, xp.where(bad, d, low[:, j, j]))
            below = (a[:, j + 1:, j] - (low[:, j + 1:, :j] @ row[:, :, None])[..., 0]
                     ) / root[:, None]
            low[:, j + 1:, j] = xp.where(active[:, None], below, low[:, j + 1:, j])
    return low, info


class CholeskyEx(Cholesky):
    """Cholesky that reports a non-positive-definite matrix in `info_out` (Cholesky's
    gradient)."""

    name = "linalg.cholesky_ex"

    def forward(self, a):
        xp = self.device.xp
        batch, n = a.shape[:-2], a.shape[-1]
        try:
            with xp.errstate(all="ignore"):
                low = xp.linalg.cholesky(a)
            info = xp.zeros(batch, xp.int32)
        except xp.linalg.LinAlgError:
            src = xp.swapaxes(a, -1, -2) if self.upper else a  # the triangle LAPACK reads
            low, info = _cholesky_columns(xp, src.reshape((-1, n, n)))
            low, info = low.reshape(a.shape), info.reshape(batch)
        self.info_out = info
        return xp.ascontiguousarray(xp.swapaxes(low, -1, -2)) if self.upper else low


def _info(op, like: Tensor) -> Tensor:
    batch = tuple(like.shape[:-2])
    data = op.__dict__.pop("info_out", None)
    if data is None and like._data is not None:  # LAPACK succeeded on every matrix
        data = like.device.xp.zeros(batch, like.device.xp.int32)
    return Tensor._make(data, batch, _dt.int32, like.device)


def _check(op: str, info: Tensor, what: str) -> None:
    if info._data is not None and info._data.size and info._data.any():
        raise LinAlgError(f"{op}: {what} (info = {int(info._data.max())})", op=op)


@public(sf=False, linalg=True)
def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False):  # noqa: N803
    """(L, info): linalg.cholesky, with info > 0 (the order of the first leading minor that
    is not positive-definite) in place of an error."""
    op = CholeskyEx(upper)
    low = apply(op, A)
    info = _info(op, A)
    if check_errors:
        _check("linalg.cholesky_ex", info, "the input is not positive-definite")
    return CholeskyExResult(low, info)


def _lu_info(xp, a):
    """getrf's info per matrix: the 1-based index of U's first zero pivot, 0 if none."""
    return lu_kernel(xp, a)[3]


class InvEx(Inv):
    """inv that reports singular matrices in `info_out`; their inverse is NaN (undefined)."""

    name = "linalg.inv_ex"

    def forward(self, a):
        xp = self.device.xp
        try:
            with xp.errstate(all="ignore"):
                return xp.linalg.inv(a)
        except xp.linalg.LinAlgError:
            info = _lu_info(xp, a)
            self.info_out = info
            out = xp.full(a.shape, xp.nan, a.dtype)
            ok = info == 0
            out[ok] = xp.linalg.inv(a[ok])
            return out


class SolveEx(Solve):
    """solve that reports singular matrices in `info_out`; their solution is NaN."""

    name = "linalg.solve_ex"

    def forward(self, a, b):
        xp = self.device.xp
        batch = xp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        wide_a = xp.broadcast_to(a, batch + a.shape[-2:])
        b = xp.broadcast_to(b, batch + b.shape[-2:])
        try:
            with xp.errstate(all="ignore"):
                return xp.linalg.solve(wide_a, b)
        except xp.linalg.LinAlgError:
            info = _lu_info(xp, a)  # per matrix of A, as PyTorch's (not broadcast)
            self.info_out = info
            out = xp.full(b.shape, xp.nan, b.dtype)
            ok = xp.broadcast_to(info == 0, batch)
            out[ok] = xp.linalg.solve(wide_a[ok], b[ok])
            return out


@public(sf=False, linalg=True)
def inv_ex(A: Tensor, *, check_errors: bool = False):  # noqa: N803
    """(inverse, info): linalg.inv, with info > 0 (U's first zero pivot, 1-based) where a
    matrix is singular instead of an error; such a matrix's inverse is NaN."""
    op = InvEx()
    out = apply(op, A)
    info = _info(op, A)
    if check_errors:
        _check("linalg.inv_ex", info, "the input is singular: it cannot be inverted")
    return InvExResult(out, info)


@public(sf=False, linalg=True)
def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False):  # noqa: N803
    """(result, info): linalg.solve, with info > 0 where a matrix is singular instead of an
    error; such a system's result is NaN."""
    check_matrix("linalg.solve_ex", A)
    if not left:
        res = solve_ex(A.mT, B.mT, check_errors=check_errors)
        return SolveExResult(res.result.mT, res.info)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    op = SolveEx()
    out = apply(op, A, B.unsqueeze(-1) if vector else B)
    info = _info(op, A)
    if check_errors:
        _check("linalg.solve_ex", info, "the input is singular: the system has no unique "
               "solution")
    return SolveExResult(out.squeeze(-1) if vector else out, info)
