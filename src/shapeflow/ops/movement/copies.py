"""Ops that copy data: clone, contiguous, repeat, flip, tril / triu."""

from __future__ import annotations

from ...errors import DTypeError, ShapeRuntimeError
from ...shape import normalize_dims
from ...tensor import Tensor, describe
from .. import meta_layout
from ..base import Op, apply
from ..registry import public


class Clone(Op):
    name = "clone"

    def infer(self, x):
        return x.shape, x.dtype

    def forward(self, x):
        return self.device.xp.array(x, copy=True, order="C")

    def backward(self, g):
        return (g,)


_FORMAT_RANK = {"preserve_format": None, "contiguous_format": None, "channels_last": 4,
                "channels_last_3d": 5}


def _check_format(x: Tensor, memory_format, op: str) -> None:
    """PyTorch's memory_format= accepted and checked; shapeflow's arrays stay row-major
    (values are the same either way, and its convolutions pick NHWC inside)."""
    if memory_format is None:
        return
    name = getattr(memory_format, "name", None)
    if name not in _FORMAT_RANK:
        raise DTypeError(f"{op}: memory_format must be a memory format (sf.preserve_format, "
                         f"sf.contiguous_format, sf.channels_last), got {memory_format!r}",
                         op=op)
    rank = _FORMAT_RANK[name]
    if rank is not None and x.ndim != rank:
        raise ShapeRuntimeError(f"{op}: required rank {rank} tensor to use {name} format, "
                                f"got rank {x.ndim}", op=op, operands=[("input", describe(x))])


@public(method=True)
def clone(x: Tensor, *, memory_format=None) -> Tensor:
    """A copy of x with its own data (differentiable)."""
    if memory_format is not None:
        _check_format(x, memory_format, "clone")
    return apply(Clone(), x)


@public(method=True)
def contiguous(x: Tensor, memory_format=None) -> Tensor:
    """x itself where its data are row-major already, else a row-major copy."""
    if memory_format is not None:
        _check_format(x, memory_format, "contiguous")
    if x._data is None:
        return x if meta_layout.is_contiguous(x) else clone(x)
    if x._data.flags.c_contiguous:
        return x
    return clone(x)


class Repeat(Op):
    name = "repeat"

    def __init__(self, sizes) -> None:
        self.sizes = tuple(sizes)

    def infer(self, x):
        k = len(self.sizes)
        if k < x.ndim:
            raise ShapeRuntimeError(
                f"repeat: {k} repeat sizes {self.sizes} are fewer than the tensor's {x.ndim} dims",
                op="repeat", operands=[("input", describe(x))])
        for r in self.sizes:
            if type(r) is not int or r < 0:
                raise ShapeRuntimeError(f"repeat: repeat sizes must be non-negative ints, got "
                                        f"{self.sizes}", op="repeat")
        self.in_shape = x.shape
        self.padded = (1,) * (k - x.ndim) + tuple(x.shape)
        return tuple(s * r for s, r in zip(self.padded, self.sizes)), x.dtype

    def forward(self, x):
        return self.device.xp.tile(x.reshape(self.padded), self.sizes)

    def backward(self, g):
        split = []
        for r, s in zip(self.sizes, self.padded):
            split += [r, s]
        g = g.reshape(tuple(split)).sum(dim=tuple(range(0, len(split), 2)))
        return (g.reshape(tuple(self.in_shape)),)


@public(method=True)
def repeat(x: Tensor, *sizes) -> Tensor:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    return apply(Repeat(sizes), x)


class Flip(Op):
    name = "flip"

    def __init__(self, dims) -> None:
        self.dims = dims

    def infer(self, x):
        axes = normalize_dims(self.dims, x.ndim, "flip")  # checks the dims on 0-d too
        self.axes = axes if x.ndim else ()
        return x.shape, x.dtype

    def forward(self, x):
        return self.device.xp.flip(x, self.axes).copy() if self.axes else x.copy()

    def backward(self, g):
        return (apply(Flip(self.axes), g),)


@public(method=True)
def flip(x: Tensor, dims) -> Tensor:
    return apply(Flip((dims,) if isinstance(dims, int) else tuple(dims)), x)


class Tril(Op):
    name = "tril"
    fn = "tril"  # the namespace's function

    def __init__(self, diagonal: int = 0) -> None:
        self.diagonal = diagonal

    def infer(self, x):
        if x.ndim < 2:
            raise ShapeRuntimeError(
                f"{self.name}: the input must have at least 2 dims, got "
                f"{describe(x)}", op=self.name, operands=[("input", describe(x))])
        return x.shape, x.dtype

    def forward(self, x):
        return getattr(self.device.xp, self.fn)(x, self.diagonal)

    def backward(self, g):
        return (apply(type(self)(self.diagonal), g),)


class Triu(Tril):
    name = "triu"
    fn = "triu"


@public(method=True)
def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    return apply(Tril(diagonal), x)


@public(method=True)
def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    return apply(Triu(diagonal), x)

