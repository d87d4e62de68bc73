"""Diagonals: diagonal (a view), diag_embed, diag, diagflat, trace."""

from __future__ import annotations

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ShapeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from .. import meta_layout
from ..base import Op, apply
from ..registry import public
from .views import View, _view_apply


def _diag_len(n1, n2, offset: int):
    """How many elements the offset diagonal of an n1 x n2 matrix has."""
    if offset >= 0:
        return max(min(n1, n2 - offset), 0)
    return max(min(n1 + offset, n2), 0)


class Diagonal(View):
    """The offset diagonal of dims (dim1, dim2), as a view; it becomes the last dim."""

    name = "diagonal"

    def __init__(self, offset: int, dim1: int, dim2: int) -> None:
        self.offset, self.dim1, self.dim2 = offset, dim1, dim2

    def infer(self, x):
        if x.ndim < 2:
            raise ShapeError(f"diagonal: expected a tensor with >= 2 dims, got {describe(x)}",
                             op="diagonal", operands=[("input", describe(x))])
        d1 = normalize_dim(self.dim1, x.ndim, "diagonal")
        d2 = normalize_dim(self.dim2, x.ndim, "diagonal")
        if d1 == d2:
            raise ShapeError(f"diagonal: dim1 and dim2 cannot be the same dim ({d1})",
                             op="diagonal", operands=[("input", describe(x))])
        self.d1, self.d2, self.in_shape = d1, d2, x.shape
        rest = tuple(s for i, s in enumerate(x.shape) if i not in (d1, d2))
        return rest + (_diag_len(x.shape[d1], x.shape[d2], self.offset),), x.dtype

    def forward(self, x):
        return self._view(self.device.xp, x)

    def meta_layout(self, arr):
        return self._view(meta_layout.host, arr)

    def _view(self, xp, x):
        # a writable view (np.diagonal's is read-only): x.diagonal().fill_(0) works
        xm = xp.moveaxis(x, (self.d1, self.d2), (-2, -1))
        off = self.offset
        corner = xm[..., max(-off, 0):, max(off, 0):]
        n = _diag_len(xm.shape[-2], xm.shape[-1], off)
        return xp.lib.stride_tricks.as_strided(
            corner, corner.shape[:-2] + (n,),
            corner.strides[:-2] + (corner.strides[-2] + corner.strides[-1],))

    def backward(self, g):
        return (apply(DiagScatter(tuple(self.in_shape), self.offset, self.d1, self.d2), g),)


class DiagScatter(Op):
    """Zeros of `shape` with the input (diagonal last) on the offset diagonal of (d1, d2):
    diag_embed, and diagonal's gradient."""

    name = "diag_embed"

    def __init__(self, shape: tuple, offset: int, d1: int, d2: int) -> None:
        self.shape, self.offset, self.d1, self.d2 = shape, offset, d1, d2

    def infer(self, g):
        return self.shape, g.dtype

    def forward(self, g):
        xp = self.device.xp
        out = xp.zeros(self.shape, g.dtype)
        view = xp.moveaxis(out, (self.d1, self.d2), (-2, -1))
        i = xp.arange(g.shape[-1])
        view[..., i + max(-self.offset, 0), i + max(self.offset, 0)] = g
        return out

    def backward(self, gg):
        return (_view_apply(Diagonal(self.offset, self.d1, self.d2), gg),)


@public(method=True)
def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The offset diagonal of dims dim1 and dim2 (a view; the diagonal is the last dim)."""
    return _view_apply(Diagonal(offset, dim1, dim2), x)


@public(method=True)
def diag_embed(x: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """A tensor whose (dim1, dim2) matrices hold x's last dim on their offset diagonal."""
    n = x.ndim + 1
    d1, d2 = normalize_dim(dim1, n, "diag_embed"), normalize_dim(dim2, n, "diag_embed")
    if d1 == d2:
        raise ShapeError(f"diag_embed: dim1 and dim2 cannot be the same dim ({d1})",
                         op="diag_embed", operands=[("input", describe(x))])
    if x.ndim == 0:
        raise ShapeError("diag_embed: expected a tensor with >= 1 dim", op="diag_embed",
                         operands=[("input", describe(x))])
    size = x.shape[-1] + abs(offset)
    rest = iter(x.shape[:-1])
    shape = tuple(size if i in (d1, d2) else next(rest) for i in range(n))
    return apply(DiagScatter(shape, offset, d1, d2), x)


@public(method=True)
def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """1-D: a square matrix with x on its diagonal-th diagonal; 2-D: that diagonal (a copy)."""
    if x.ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if x.ndim == 2:
        return _view_apply(Diagonal(diagonal, 0, 1), x).clone()
    raise ShapeError(f"diag: expected a 1-D or 2-D tensor, got {describe(x)}", op="diag",
                     operands=[("input", describe(x))], hint="use diagonal() or diag_embed() "
                     "for batches")


@public(method=True)
def trace(x: Tensor) -> Tensor:
    """The sum of a matrix's main diagonal."""
    if _autocast_hot.on:  # sf.autocast: fp32
        x, = _autocast.fp32(x)
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix (2-D), got {describe(x)}", op="trace",
                         operands=[("input", describe(x))],
                         hint="for batches: x.diagonal(dim1=-2, dim2=-1).sum(-1)")
    return diagonal(x).sum()


@public(method=True)
def diagflat(input: Tensor, offset: int = 0) -> Tensor:  # noqa: A002
    """A square matrix with input's elements (flattened) on its offset-th diagonal."""
    return diag_embed(input.reshape(-1), offset, 0, 1)
