"""Norms and what the SVD gives: vector_norm, matrix_norm, norm, pinv, matrix_rank, cond;
and linalg.cross. Composites of the primitives."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...errors import ShapeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..elementwise import abs as abs_
from ..reduce import amax, amin
from ..reduce import norm as _norm
from ..reduce import sum as sum_
from ..registry import public
from ._common import check_float, check_matrix
from .decompositions import pinv, svdvals
from .products import cross as _cross

_EPS = {_dt.float32: 2.0 ** -23, _dt.float64: 2.0 ** -52}  # machine epsilon (NumPy's finfo)


@public(sf=False, linalg=True)
def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The vector ord-norm over dim (all elements when None): sum(|x|^ord)^(1/ord)."""
    if dtype is not None:
        x = x.to(dtype)
    check_float("linalg.vector_norm", x)
    if isinstance(ord, str):
        raise ShapeError(f"linalg.vector_norm: ord must be a number, got {ord!r}",
                         op="linalg.vector_norm", hint="use matrix_norm for 'fro' and 'nuc'")
    if ord < 0 and ord != -math.inf:  # sum(|x|^p)^(1/p) for negative p, as PyTorch
        s = sum_(abs_(x) ** ord, dim, keepdim)
        return s ** (1.0 / ord)
    return _norm(x, ord, dim, keepdim)


@public(sf=False, linalg=True)
def matrix_norm(a: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False, *,
                dtype=None) -> Tensor:
    """'fro', 'nuc', 2, -2 (largest / smallest singular value), 1, -1, inf, -inf."""
    if dtype is not None:
        a = a.to(dtype)
    check_matrix("linalg.matrix_norm", a, square=False)
    d0, d1 = (normalize_dim(d, a.ndim, "linalg.matrix_norm") for d in dim)
    if d0 == d1:
        raise ShapeError(f"linalg.matrix_norm: dims must differ, got {dim}",
                         op="linalg.matrix_norm", operands=[("A", describe(a))])
    if ord == "fro":
        return _norm(a, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        moved = a.movedim((d0, d1), (-2, -1))
        s = svdvals(moved)
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        return _keep(out, (d0, d1), a.ndim) if keepdim else out
    if ord in (1, -1, math.inf, -math.inf):
        over, across = (d0, d1) if ord in (1, -1) else (d1, d0)
        sums = sum_(abs_(a), over, True)
        out = amax(sums, across, True) if ord > 0 else amin(sums, across, True)
        return out if keepdim else out.squeeze((d0, d1))
    raise ShapeError(f"linalg.matrix_norm: unsupported ord {ord!r}", op="linalg.matrix_norm",
                     hint="use 'fro', 'nuc', 2, -2, 1, -1, inf or -inf")


def _keep(out: Tensor, dims, ndim: int) -> Tensor:
    for d in sorted(dims):
        out = out.unsqueeze(d)
    return out


@public(sf=False, linalg=True)
def norm(a: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """linalg.norm: the vector norm of a flattened or 1-D input (or over an int dim), the
    matrix norm of 2-D inputs (or over two dims) when ord is given."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2:
        return matrix_norm(a, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None and ord is not None and a.ndim == 2:
        return matrix_norm(a, ord, (-2, -1), keepdim, dtype=dtype)
    if dim is None and ord is not None and a.ndim != 1:
        raise ShapeError(f"linalg.norm: with ord, the input must be 1-D or 2-D, got "
                         f"{describe(a)}", op="linalg.norm", hint="pass dim, or flatten first")
    return vector_norm(a, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def _cutoff(a: Tensor, s: Tensor, atol, rtol) -> Tensor:
    from ..elementwise import maximum

    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else _EPS[a.dtype] * max(a.shape[-2],
                                                                              a.shape[-1])
    top = s.amax(-1, keepdim=True) if s.shape[-1] else s.sum(-1, keepdim=True)
    cut = top * rtol
    if atol is not None:
        cut = maximum(cut, atol) if not isinstance(atol, Tensor) else maximum(cut, atol)
    return cut


@public(sf=False, linalg=True)
def matrix_rank(a: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """How many singular values are above max(atol, rtol * largest) (an int64 count)."""
    check_matrix("linalg.matrix_rank", a, square=False)
    s = svdvals(a.detach())
    return (s > _cutoff(a, s, atol, rtol)).sum(-1)


@public(sf=False, linalg=True)
def cross(a: Tensor, b: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along dim (default the last), broadcasting."""
    return _cross(a, b, dim)


@public(method=True)
def pinverse(a: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: pinv with rtol=rcond."""
    return pinv(a, rtol=rcond)


@public(sf=False, linalg=True)
def cond(A: Tensor, p=None) -> Tensor:  # noqa: N803
    """The condition number ||A||_p ||A^-1||_p: from the singular values for p = None, 2, -2
    (any shape), from matrix_norm and the inverse for 'fro', 'nuc', inf, -inf, 1, -1
    (square; inf where A is singular)."""
    from ..elementwise import where
    from .info import inv_ex

    if p in (None, 2, -2):
        check_matrix("linalg.cond", A, square=False)
        s = svdvals(A)
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    if p not in ("fro", "nuc", math.inf, -math.inf, 1, -1):
        raise ShapeError(f"linalg.cond: unsupported p {p!r}", op="linalg.cond",
                         hint="use None, 2, -2, 'fro', 'nuc', inf, -inf, 1 or -1")
    check_matrix("linalg.cond", A)
    inverse, info = inv_ex(A)
    singular = info > 0
    # a singular matrix's inverse is NaN: zeros keep the norm's SVD finite, then inf
    inverse = where(singular.unsqueeze(-1).unsqueeze(-1), 0.0, inverse)
    out = matrix_norm(A, p) * matrix_norm(inverse, p)
    return where(singular, math.inf, out)
