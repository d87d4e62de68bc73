"""GELU, x * Phi(x) (or its tanh approximation), with its fused backward kernels.

Phi(x) is a kernel of the device's table (float64 exactly through erf, other dtypes from a
float32 table); 16-bit inputs run float32 steps in blocks and are rounded once.
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...autograd import grad_mode
from ...device import cpu
from ...errors import DTypeError, ShapeError
from ...tensor import Tensor, describe
from ..base import X0, X0_ACT, apply
from ..elementwise.unary import Unary, exp
from ..registry import public
from ._common import _FloatOnly, _GradKernel

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def normal_cdf(x, kernels=None):
    """Phi(x) of an array: float64 through math.erf exactly, other dtypes from a float32
    table (error < 1.5e-7); with the cpu kernel table unless `kernels` is given."""
    return (cpu.kernels if kernels is None else kernels).normal_cdf(x)


def _is_half(x) -> bool:
    """bfloat16 or float16 data: the GELU tables compute these in float32 blocks."""
    return x.dtype.itemsize == 2 and (x.dtype.kind == "f" or x.dtype.name == "bfloat16")


class Gelu(_FloatOnly):
    name = "gelu"

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ShapeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def infer(self, x):
        if not x.dtype.is_floating_point:  # PyTorch has no integer GELU
            raise DTypeError(f"gelu: needs a floating-point input, got {x.dtype}", op="gelu",
                             operands=[("input", describe(x))], hint="use x.float()")
        return Unary.infer(self, x)

    def saved(self, x, out):
        return (X0_ACT,)

    def fn(self, x):
        k = self.device.kernels
        if self.approximate == "tanh":
            inner = k.xp.tanh((x + 0.044715 * x * x * x) * _SQRT_2_OVER_PI)
            return (0.5 * x * (1.0 + inner)).astype(x.dtype, copy=False)
        if x.dtype.char == "d":
            return x * k.normal_cdf(x)
        return k.gelu_table(x, "phi", x)

    def forward(self, x):
        if self.approximate == "none" and _is_half(x):  # float32 steps in blocks, one rounding
            return self.device.kernels.gelu_table(x, "phi", x)
        return Unary.forward(self, x)

    def backward(self, g):
        (x,) = self.saved_tensors
        fused = self.approximate == "none" and (
            x.dtype is _dt.float32 or (x.dtype.itemsize == 2 and g.dtype is x.dtype))
        if fused and not grad_mode.is_grad_enabled():  # no grad of grad: one blockwise pass
            return (apply(GeluBackward(), g, x),)
        return (g * apply(GeluGrad(self.approximate), x),)


class GeluBackward(_GradKernel):
    """g * d gelu / dx in one blockwise pass: float32, or 16-bit computed in float32 blocks
    and rounded once (no whole-array float32 copies)."""

    name = "gelu_backward"

    def forward(self, g, x):
        return self.device.kernels.gelu_table(x, "gelu_grad", g)


class GeluGrad(Unary):
    """d gelu / dx as its own primitive (so grad of grad goes through it)."""

    name = "gelu_backward"

    def __init__(self, approximate: str) -> None:
        self.approximate = approximate

    def saved(self, x, out):
        return (X0,)

    def fn(self, x):
        k = self.device.kernels
        if self.approximate == "tanh":
            u = (x + 0.044715 * x * x * x) * _SQRT_2_OVER_PI
            th = k.xp.tanh(u)
            du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
            return (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du).astype(x.dtype, copy=False)
        if x.dtype.char == "d":
            pdf = k.xp.exp(-0.5 * x * x) * _INV_SQRT_2PI
            return k.normal_cdf(x) + x * pdf
        return k.gelu_table(x, "gelu_grad")

    def forward(self, x):
        if self.approximate == "none" and _is_half(x):
            return self.device.kernels.gelu_table(x, "gelu_grad")
        return Unary.forward(self, x)

    def backward(self, g):
        (x,) = self.saved_tensors
        if self.approximate == "tanh":
            raise NotImplementedError("second derivative of tanh-GELU")
        pdf = exp(x * x * -0.5) * _INV_SQRT_2PI
        return (g * pdf * (2.0 - x * x),)


@public(functional=True)
def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return apply(Gelu(approximate), x)
