"""Activations that are not in elementwise: leaky_relu and elu."""

from __future__ import annotations

from ...tensor import Tensor
from ..base import OUT_ACT, X0_ACT, Op, apply
from ..elementwise import where
from ._common import _need_float


class LeakyRelu(Op):
    name = "leaky_relu"

    def __init__(self, slope: float) -> None:
        self.slope = slope

    def infer(self, x):
        _need_float(self.name, x)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,) if self.slope > 0 else (X0_ACT,)

    def forward(self, x):
        return self.device.xp.where(x > 0, x, x * x.dtype.type(self.slope))

    def backward(self, g):
        (t,) = self.saved_tensors
        return (where(t > 0, g, g * self.slope),)


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


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return apply(LeakyRelu(negative_slope), input)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return apply(Elu(alpha), input)
