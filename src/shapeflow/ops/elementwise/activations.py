"""Activations: sigmoid, relu, silu, softplus, gelu, with their fused backward kernels.

sigmoid, silu and GELU's Phi(x) tables are kernels of the device's table (compiled passes
on cpu); the rest is the device's array namespace.
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...autograd import grad_mode
from ...device import cpu
from ...errors import DTypeError, ShapeError
from ...tensor import Tensor, describe
from ..base import OUT_ACT, X0, X0_ACT, Op, apply
from ._common import refuse_dtype
from .compare import where
from .silu_fused import SiluBackward
from .unary import Unary, exp


class Sigmoid(Unary):
    name = "sigmoid"

    def fn(self, x):
        return self.device.kernels.sigmoid(x)  # PyTorch's 1 / (1 + exp(-x))

    def saved(self, x, out):
        return (OUT_ACT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * out * (1.0 - out),)


class Relu(Op):
    name = "relu"

    def infer(self, x):
        if x.dtype is _dt.bool_:
            refuse_dtype(self.name, x, runtime=True)  # PyTorch: RuntimeError
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,)

    def forward(self, x):
        return self.device.xp.maximum(x, 0)

    def backward(self, g):
        (out,) = self.saved_tensors
        if not grad_mode.is_grad_enabled() and g.dtype is out.dtype:  # no grad of grad: one op
            return (apply(ReluBackward(), g, out),)
        return (g * (out > 0),)


class _GradKernel(Op):
    """A fused backward `forward(g, x)`: the gradient of x, with x's shape and dtype.

    Not differentiable itself: with create_graph the op's backward takes its composite path.
    """

    differentiable = False

    def infer(self, g, x):
        return x.shape, x.dtype


class ReluBackward(_GradKernel):
    """g * (out > 0) as one op."""

    name = "relu_backward"

    def forward(self, g, out):
        return g * (out > 0)


class _FloatOnly(Unary):
    """PyTorch's activation kernels exist for floating-point inputs only."""

    def infer(self, x):
        if x.dtype.category != 2:
            refuse_dtype(self.name, x)
        return x.shape, x.dtype


_F3264 = (_dt.float32, _dt.float64)  # SiluBackward's dtypes (16-bit: the composite path)


class Silu(_FloatOnly):
    name = "silu"

    def saved(self, x, out):
        return (X0_ACT,)

    def fn(self, x):
        return self.device.kernels.silu(x)  # one compiled pass for float32 on cpu

    def backward(self, g):
        (x,) = self.saved_tensors
        if not grad_mode.is_grad_enabled() and g.dtype is x.dtype and x.dtype in _F3264:
            return (apply(SiluBackward(), g, x),)  # no grad of grad: one op
        s = sigmoid(x)
        return (g * s * (1.0 + x * (1.0 - s)),)


class Softplus(_FloatOnly):
    name = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        self.beta, self.threshold = beta, threshold

    def saved(self, x, out):
        return (X0_ACT,)

    def fn(self, x):
        xp = self.device.xp
        bx = x * self.beta
        soft = xp.logaddexp(0, bx) / self.beta
        return xp.where(bx > self.threshold, x, soft).astype(x.dtype, copy=False)

    def backward(self, g):
        (x,) = self.saved_tensors
        bx = x * self.beta
        return (g * where(bx > self.threshold, 1.0, sigmoid(bx)),)


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


def sigmoid(x: Tensor) -> Tensor:
    return apply(Sigmoid(), x)


def relu(x: Tensor) -> Tensor:
    return apply(Relu(), x)


def silu(x: Tensor) -> Tensor:
    return apply(Silu(), x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return apply(Gelu(approximate), x)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return apply(Softplus(beta, threshold), x)

