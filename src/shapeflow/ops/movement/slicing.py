"""Basic indexing: a view selecting ints and slices, adding None dims (narrow, select, unbind)."""

from __future__ import annotations

import operator

from ...errors import DTypeError, ShapeIndexError, ShapeRuntimeError
from ...shape import format_shape, normalize_dim
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..registry import public
from .views import View, _view_apply


def _as_bound(b, op: str):
    """A slice bound or index as an int (or a symbolic dim); None stays None."""
    if b is None or type(b) is int:
        return b
    from ...symbolic import is_symbolic

    if is_symbolic(b):
        return b
    if isinstance(b, (float, bool)) or (isinstance(b, Tensor) and not b.dtype.is_integer):
        raise DTypeError(f"{op}: indices must be integers or None, got {b!r}", op=op)
    try:
        return operator.index(b)
    except TypeError:
        raise DTypeError(f"{op}: indices must be integers or None, got {b!r}",
                         op=op) from None


def slice_size(s: slice, n, op: str = "getitem"):
    """(normalized slice, size) of slicing a dim of size n (int or symbolic)."""
    step = 1 if s.step is None else _as_bound(s.step, op)
    if type(step) is not int or step <= 0:
        raise ShapeRuntimeError(f"{op}: step must be greater than zero, got {step}", op=op,
                                hint="negative steps are not supported (as in PyTorch); use flip()")
    start, stop = _as_bound(s.start, op), _as_bound(s.stop, op)
    if type(n) is int and (start is None or type(start) is int) and (
            stop is None or type(stop) is int):
        start, stop, step = slice(start, stop, step).indices(n)
        return slice(start, stop, step), len(range(start, stop, step))
    # A symbolic size (or bound): a bound that may lie outside the dim is taken to lie inside.
    start = 0 if start is None else _sym_bound(start, n)
    stop = n if stop is None else _sym_bound(stop, n)
    length = stop - start
    size = length if step == 1 else (length + (step - 1)) // step
    if type(size) is int and size < 0:
        size = 0
    return slice(start, stop, step), size


def _sym_bound(b, n):
    """A slice bound on a dim of symbolic size n, clamped where the comparison is decided."""
    from ...symbolic import dim_le

    if type(b) is int and b < 0:
        b = n + b
        return 0 if dim_le(b, 0) else b
    return n if dim_le(n, b) else b


def basic_index(shape, key, op: str = "getitem", x=None):
    """(out shape, normalized key) for a key of ints, slices and None (no Ellipsis)."""
    out, norm, d, ndim = [], [], 0, len(shape)
    for item in key:
        if item is None:
            norm.append(None)
            out.append(1)
            continue
        if d >= ndim:
            raise ShapeIndexError(
                f"{op}: too many indices for tensor of dimension {ndim}", op=op,
                operands=[("input", describe(x) if x is not None else format_shape(shape))])
        n = shape[d]
        if type(item) is slice:
            item, size = slice_size(item, n, op)
            out.append(size)
        elif type(n) is int:
            i = item
            if type(i) is int and not -n <= i < n:
                raise ShapeIndexError(
                    f"{op}: index {i} is out of bounds for dim {d} with size {n}", op=op,
                    operands=[("input", describe(x) if x is not None else format_shape(shape))])
            item = i + n if i < 0 else i
        elif type(item) is int and item < 0:
            item = n + item  # symbolic size: the int is taken to be in range
        norm.append(item)
        d += 1
    out.extend(shape[d:])
    return tuple(out), tuple(norm)


class Index(View):
    """x[key] for ints, slices (step > 0) and None: a view."""

    name = "getitem"
    slice_backward = True

    def __init__(self, key, name: str = "getitem") -> None:
        self.key, self.name = key, name

    def infer(self, x):
        shape, self.key = basic_index(x.shape, self.key, self.name, x)
        self.in_shape = x.shape
        return shape, x.dtype

    def forward(self, x):
        return x[self.key + (Ellipsis,)]  # the Ellipsis keeps a 0-d result a view

    def backward(self, g):
        return (apply(IndexBackward(self.key, self.in_shape), g),)


class IndexBackward(Op):
    """The gradient of basic indexing: g written into zeros of the input's shape."""

    name = "getitem_backward"

    def __init__(self, key, in_shape) -> None:
        self.key, self.in_shape = key, in_shape

    def infer(self, g):
        return self.in_shape, g.dtype

    def forward(self, g):
        out = self.device.xp.zeros(self.in_shape, g.dtype)
        out[self.key + (Ellipsis,)] = g
        return out

    def backward(self, gg):
        return (_view_apply(Index(self.key), gg),)


def _index_view(x: Tensor, key, name: str) -> Tensor:
    return _view_apply(Index(key, name), x)


def _no_dims(x: Tensor, op: str, cls=ShapeRuntimeError) -> None:
    """PyTorch's split/narrow/unbind do not treat a 0-d tensor as having a dim 0."""
    if x.ndim == 0:
        raise cls(f"{op}: cannot be applied to a 0-d tensor, which has no dims", op=op,
                  operands=[("input", describe(x))],
                  hint="reshape it to 1-d first: x.reshape(1)")


@public(method=True)
def narrow(x: Tensor, dim: int, start, length) -> Tensor:
    _no_dims(x, "narrow")
    d = normalize_dim(dim, x.ndim, "narrow")
    n = x.shape[d]
    start, length = _as_bound(start, "narrow"), _as_bound(length, "narrow")
    if type(start) is int and start < 0:
        start = start + n
    if type(n) is int and type(start) is int and type(length) is int and (
            start < 0 or length < 0 or start + length > n):
        raise ShapeRuntimeError(
            f"narrow: start ({start}) + length ({length}) is out of range for dim {d} of "
            f"size {n}", op="narrow", operands=[("input", describe(x))])
    return _index_view(x, (slice(None),) * d + (slice(start, start + length),), "narrow")


@public(method=True)
def select(x: Tensor, dim: int, index) -> Tensor:
    d = normalize_dim(dim, x.ndim, "select")
    return _index_view(x, (slice(None),) * d + (_as_bound(index, "select"),), "select")


@public(method=True)
def unbind(x: Tensor, dim: int = 0) -> tuple:
    _no_dims(x, "unbind", ShapeIndexError)
    d = normalize_dim(dim, x.ndim, "unbind")
    n = x.shape[d]
    if type(n) is not int:
        raise ShapeRuntimeError(f"unbind: dim {d} has symbolic size {n}: the number of outputs is "
                                "unknown", op="unbind", operands=[("input", describe(x))])
    pre = (slice(None),) * d
    return tuple(_index_view(x, pre + (i,), "unbind") for i in range(n))

