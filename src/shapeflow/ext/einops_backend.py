"""einops' backend for shapeflow: `rearrange`, `reduce`, `repeat`, `pack`/`unpack` and
`einsum` on shapeflow tensors, with gradients, and on meta tensors with symbolic dims.

einops finds a framework through the subclasses of its `AbstractBackend` whose
`framework_name` is an imported module; defining the class here is the registration.
shapeflow.ext imports this module when einops is imported (never the other way round).
"""

from __future__ import annotations

from einops._backends import AbstractBackend

from ..dtypes import int64
from ..factories import arange
from ..ops.linalg.einsum import einsum
from ..ops.movement import cat, stack
from ..tensor import Tensor, from_numpy


class ShapeflowBackend(AbstractBackend):
    """Each einops primitive as the shapeflow op PyTorch's backend uses."""

    framework_name = "shapeflow"

    def is_appropriate_type(self, tensor) -> bool:
        return isinstance(tensor, Tensor)

    def from_numpy(self, x):
        t = from_numpy(x)
        return t.requires_grad_(True) if t.is_floating_point() else t

    def to_numpy(self, x):
        return x.detach().numpy()

    def arange(self, start, stop):
        return arange(start, stop, dtype=int64)

    def shape(self, x):
        # symbolic dims in a list: unhashable, so einops skips its recipe cache (whose key
        # comparisons would ask questions of symbols that may have no answer)
        shape = x.shape
        return shape if all(type(s) is int for s in shape) else list(shape)

    def reshape(self, x, shape):
        return x.reshape(tuple(shape))

    def transpose(self, x, axes):
        return x.permute(tuple(axes))

    def reduce(self, x, operation: str, reduced_axes):
        axes = tuple(reduced_axes)
        if operation == "min":
            return x.amin(dim=axes)
        if operation == "max":
            return x.amax(dim=axes)
        if operation in ("sum", "mean", "prod", "any", "all"):
            return getattr(x, operation)(dim=axes)
        raise NotImplementedError(f"einops reduction {operation!r} on shapeflow tensors")

    def stack_on_zeroth_dimension(self, tensors: list):
        return stack(tensors)

    def add_axis(self, x, new_position: int):
        return x.unsqueeze(new_position)

    def add_axes(self, x, n_axes: int, pos2len: dict):
        sizes = [-1] * n_axes
        for position, length in pos2len.items():
            x = x.unsqueeze(position)
            sizes[position] = length
        return x.expand(*sizes)  # a broadcast view, as PyTorch's backend

    def tile(self, x, repeats):
        return x.repeat(*repeats)

    def concat(self, tensors, axis: int):
        return cat(list(tensors), dim=axis)

    def is_float_type(self, x) -> bool:
        return x.dtype.is_floating_point

    def layers(self):
        from ..nn import einops_layers

        return einops_layers

    def einsum(self, pattern: str, *x):
        return einsum(pattern, *x)
