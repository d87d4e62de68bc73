"""Padding layers (as `torch.nn`): reflection, replication, circular, constant and zero.

Each pads the last 1, 2 or 3 dims through F.pad; `padding` is an int (every side) or a
tuple (left, right, top, bottom, front, back), taken as given, as PyTorch does.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..tensor import describe
from . import functional as F
from .module import Module


def _sides(padding, n: int) -> tuple:
    """An int for all n sides, or the given sequence as a tuple (PyTorch's _ntuple)."""
    if hasattr(padding, "__iter__") and not isinstance(padding, str):
        return tuple(padding)
    return (padding,) * n


class _PadNd(Module):
    """F.pad(input, padding, mode) after checking the input is batched or unbatched."""

    mode = "constant"
    dims = 1  # how many trailing dims are padded

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _sides(padding, 2 * self.dims)

    def _check_input_dim(self, input) -> None:
        d, name = self.dims, type(self).__name__
        if input.ndim not in (d + 1, d + 2):
            raise ShapeError(
                f"{name}: expected {d + 1}D or {d + 2}D input (got {input.ndim}D input)",
                op=name, operands=[("input", describe(input))],
                hint=f"the input is (C, *) or (N, C, *) with {d} padded dims")
        if len(self.padding) != 2 * d:  # F.pad's other modes pad exactly these dims
            raise ShapeError(
                f"{name}: padding {self.padding} must have {2 * d} values (2 per padded dim)",
                op=name, hint=f"pass an int or a tuple of {2 * d} ints")

    def forward(self, input):
        self._check_input_dim(input)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pad the last dim with its reflection (the edge not repeated); pads < the size."""

    mode, dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Pad the last 2 dims with their reflection (the edge not repeated)."""

    mode, dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Pad the last 3 dims with their reflection (the edge not repeated)."""

    mode, dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Pad the last dim by repeating its edge values."""

    mode, dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Pad the last 2 dims by repeating their edge values."""

    mode, dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Pad the last 3 dims by repeating their edge values."""

    mode, dims = "replicate", 3


class CircularPad1d(_PadNd):
    """Pad the last dim by wrapping around (the start pads the end and the end the start)."""

    mode, dims = "circular", 1


class CircularPad2d(_PadNd):
    """Pad the last 2 dims by wrapping around."""

    mode, dims = "circular", 2


class CircularPad3d(_PadNd):
    """Pad the last 3 dims by wrapping around."""

    mode, dims = "circular", 3


class _ConstantPadNd(_PadNd):
    """Pad with a constant value; like PyTorch, any input with enough dims is accepted."""

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value`."""

    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with `value`."""

    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with `value`."""

    dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last 2 dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last 3 dims with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d",
    "ZeroPad3d",
]
