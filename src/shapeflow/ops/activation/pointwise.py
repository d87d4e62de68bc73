"""Smooth pointwise activations: sigmoid, softplus, elu and its scaled kin (selu, celu),
softsign, logsigmoid, tanhshrink.

Sigmoid, Softplus and Elu are primitives; the rest are short composites of differentiable
primitives, so their gradients, meta shapes and grad-of-grad come from those.
"""

from __future__ import annotations

from ...errors import ArgumentError
from ...tensor import Tensor
from ..base import OUT_ACT, X0_ACT, Op, apply
from ..elementwise import abs as _abs
from ..elementwise import tanh, where
from ..elementwise.unary import Unary
from ..nn._common import _need_float
from ..registry import public
from ._common import _FloatOnly

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class Sigmoid(Unary):
    name = "sigmoid"

    def fn(self, x):
        return self.device.kernels.sigmoid(x)  # PyTorch's 1 / (1 + exp(-x))

    def saved(self, x, out):
        return (OUT_ACT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * out * (1.0 - out),)


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


class Elu(Op):
    name = "elu"

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha

    def infer(self, x):
        _need_float(self.name, x)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,) if self.alpha > 0 else (X0_ACT,)

    def forward(self, x):
        xp = self.device.xp
        return xp.where(x > 0, x, xp.expm1(xp.minimum(x, 0)) * x.dtype.type(self.alpha))

    def backward(self, g):
        (t,) = self.saved_tensors
        if self.alpha > 0:  # t is the output: alpha * exp(x) = out + alpha where x <= 0
            return (where(t > 0, g, g * (t + self.alpha)),)
        return (where(t > 0, g, g * t.exp() * self.alpha),)


@public(method=True, functional=True)
def sigmoid(x: Tensor) -> Tensor:
    return apply(Sigmoid(), x)


@public(method=True, functional=True)
def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return apply(Softplus(beta, threshold), x)


@public(sf=False, functional=True)
def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return apply(Elu(alpha), input)


@public(functional=True)
def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return elu(input, SELU_ALPHA) * SELU_SCALE


@public(functional=True)
def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ArgumentError("celu: alpha cannot be 0 (ZeroDivisionError)", op="celu")
    return elu(input / alpha, 1.0) * alpha


@public(sf=False, functional=True)
def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (_abs(input) + 1.0)


@public(sf=False, functional=True)
def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|."""
    return -softplus(-input)


@public(sf=False, functional=True)
def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - tanh(input)
