"""Least squares: linalg.lstsq, the minimum-norm X minimizing ||A X - B||_F, as the
pseudo-inverse times B (PyTorch's gradient is pinv's), with LAPACK drivers' extra outputs."""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeError
from ...tensor import Tensor, describe
from ..registry import public
from ._common import check_float, check_matrix
from .decompositions import pinv, svdvals

LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")
_EPS = {_dt.float32: 2.0 ** -23, _dt.float64: 2.0 ** -52}


def _empty(dtype, device) -> Tensor:
    from ...factories import zeros

    return zeros(0, dtype=dtype, device=device)


@public(sf=False, linalg=True)
def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *,  # noqa: N803
          driver: str | None = None):
    """(solution, residuals, rank, singular_values) for A [*, m, n] and B [*, m, k] (or
    [*, m]). As PyTorch's on cpu: the default driver is 'gelsy'; rank is given by 'gelsy',
    'gelsd' and 'gelss', singular values by 'gelsd' and 'gelss', the squared residuals
    per column when m > n by every driver but 'gelsy' (and only when every A has full rank,
    but for 'gels'); the others are empty. Singular values at or below rcond * the largest
    (rcond defaults to eps * max(m, n)) count as zero."""
    op = "linalg.lstsq"
    check_matrix(op, A, square=False)
    check_float(op, B)
    if A.dtype is not B.dtype:
        raise DTypeError(f"{op}: A and B must have the same dtype, got {A.dtype} and "
                         f"{B.dtype}", op=op, operands=[("A", describe(A)), ("B", describe(B))])
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise ShapeError(f"{op}: driver must be one of {_DRIVERS} on cpu, got {driver!r}",
                         op=op)
    vector = B.ndim == 1 or B.ndim == A.ndim - 1
    b = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if b.shape[-2] != m:
        raise ShapeError(f"{op}: B's rows must match A's {m}, got A {describe(A)} and B "
                         f"{describe(B)}", op=op, operands=[("A", describe(A)), ("B", describe(B))])
    if rcond is None:
        rcond = _EPS[A.dtype] * max(m, n)
    solution = pinv(A, rtol=rcond) @ b
    singular, rank = _empty(A.dtype, A.device), _empty(_dt.int64, A.device)
    if driver != "gels":
        s = svdvals(A.detach())
        if s.shape[-1]:
            rank = (s > s[..., :1] * rcond).sum(-1)
        else:
            from ...factories import zeros

            rank = zeros(*A.shape[:-2], dtype=_dt.int64, device=A.device)
        if driver in ("gelsd", "gelss"):
            singular = s
    residuals = _empty(A.dtype, A.device)
    if m > n and driver != "gelsy":
        full = driver == "gels" or rank._data is None or bool((rank._data == n).all())
        if full:
            # differentiable as PyTorch's (X is optimal: only the explicit A, B terms count)
            r = A @ solution - b
            residuals = (r * r).sum(-2)
    return LstsqResult(solution.squeeze(-1) if vector else solution, residuals, rank, singular)
