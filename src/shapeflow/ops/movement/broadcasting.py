"""Broadcasting as a function of shapes: broadcast_shapes, and its inverse on a tensor,
sum_to_size (the sum over the dims a broadcast to x's shape would have expanded)."""

from __future__ import annotations

from ...errors import ShapeRuntimeError
from ...shape import Shape
from ...shape import broadcast_shapes as _broadcast2
from ...tensor import Tensor, describe
from ..registry import public


def _as_shape(s) -> tuple:
    if isinstance(s, int):
        s = (s,)
    s = tuple(s)
    if any(type(n) is int and n < 0 for n in s):
        raise ShapeRuntimeError(f"broadcast_shapes: shapes cannot have negative sizes, got {s}",
                                op="broadcast_shapes")
    return s


@public()
def broadcast_shapes(*shapes) -> Shape:
    """The shape tensors of these shapes broadcast to (an int counts as a 1-d shape)."""
    out: tuple = ()
    for i, s in enumerate(shapes):
        out = _broadcast2(out, _as_shape(s), "broadcast_shapes", ("shapes so far", f"shape {i}"))
    return Shape(out)


@public(method=True)
def sum_to_size(input: Tensor, *size) -> Tensor:  # noqa: A002
    """input summed to `size`, which must be expandable to input's shape (the gradient of an
    expand, as PyTorch's Tensor.sum_to_size)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size, shape = tuple(size), tuple(input.shape)
    lead = len(shape) - len(size)
    if lead < 0 or any(s != 1 and s != n for s, n in zip(size, shape[lead:])):
        raise ShapeRuntimeError(f"sum_to_size: size {list(size)} is not expandable to size "
                                f"{list(shape)}", op="sum_to_size",
                                operands=[("input", describe(input))],
                                hint="each size must be 1 or equal to input's size in that dim, "
                                     "aligned from the right")
    if not size:  # PyTorch's sum_to: an empty size sums everything (a bool 0-d too)
        return input.sum()
    out = input.sum(tuple(range(lead))) if lead else input
    dims = tuple(i for i, (s, n) in enumerate(zip(size, shape[lead:])) if s == 1 and n != 1)
    return out.sum(dims, keepdim=True) if dims else out
