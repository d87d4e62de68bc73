"""resize_ and resize_as_: a tensor given a new shape in place, as PyTorch's on a tensor that
owns its data: the first elements (row-major) are kept, new ones are zeros (PyTorch leaves
them uninitialized). Not differentiable: a tensor that requires grad is refused, as there."""

from __future__ import annotations

from ...errors import GraphError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..registry import public


@public(sf=False, method=True)
def resize_(input: Tensor, *size, memory_format=None) -> Tensor:  # noqa: A002
    """input with shape `size`, changed in place (and returned)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise ShapeRuntimeError(f"resize_: sizes must be non-negative, got {list(size)}",
                                op="resize_", operands=[("input", describe(input))])
    if input.requires_grad:
        raise GraphError("resize_: cannot resize a tensor that requires grad", op="resize_",
                         operands=[("input", describe(input))],
                         hint="resize a detached copy, or use reshape/view")
    if tuple(input.shape) == size:
        return input
    if input._data is not None:
        n = 1
        for s in size:
            n *= s
        flat = input._data.reshape(-1)
        data = input.device.xp.zeros(n, flat.dtype)
        keep = min(n, flat.size)
        data[:keep] = flat[:keep]
        input._data = data.reshape(size)
    input.shape = Tensor._make(None, size, input.dtype, input.device).shape
    input._version[0] += 1
    input._version[1] = "resize_"
    return input


@public(method=True)
def resize_as_(input: Tensor, the_template: Tensor, *,  # noqa: A002
               memory_format=None) -> Tensor:
    """input resized in place to the_template's shape."""
    return resize_(input, tuple(the_template.shape))
