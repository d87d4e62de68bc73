"""LayerNorm, RMSNorm and GroupNorm."""

from __future__ import annotations

from ..errors import ArgumentValueError
from ..factories import empty
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


def add_affine(module: Module, shape: tuple, affine: bool, bias: bool, device, dtype) -> None:
    """A norm's learned scale (ones) and shift (zeros) of `shape`, or None for each absent."""
    weight = bias_ = None
    if affine:
        weight = Parameter(init.ones_(empty(shape, device=device, dtype=dtype)))
        if bias:
            bias_ = Parameter(init.zeros_(empty(shape, device=device, dtype=dtype)))
    module.register_parameter("weight", weight)
    module.register_parameter("bias", bias_)


def reset_affine(module: Module) -> None:
    """Scale back to ones, shift back to zeros (what a norm's reset_parameters does)."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


def _shape(normalized_shape) -> tuple:
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """Normalise over the last dims to mean 0, variance 1, then scale and shift."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        add_affine(self, self.normalized_shape, elementwise_affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) over the last dims, times a learned scale."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalise each group of num_channels / num_groups channels per sample, then a
    per-channel scale and shift."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ArgumentValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        add_affine(self, (num_channels,), affine, bias, device, dtype)

    def reset_parameters(self) -> None:
        reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
