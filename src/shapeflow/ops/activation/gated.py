"""Gated activations, x times a gate of itself or of a second half: silu (with its one-op
backward), glu, mish, hardswish.

SiLU's forward is x * sigmoid(x) (the kernel table's `silu`); its backward
g * s * (1 + x * (1 - s)) with s = sigmoid(x), both PyTorch's formulas. The compiled kernels
(backend/cpu/norm_act_kernels.c) take float32 in one pass each; the portable kernels compute
what the composite ops compute, bit for bit.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd import grad_mode
from ...errors import ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..base import X0_ACT, Op, apply
from ..elementwise import tanh
from ..registry import public
from ._common import _FloatOnly
from .piecewise import hardsigmoid
from .pointwise import sigmoid, softplus

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


class SiluBackward(Op):
    """g * d silu(x) / dx as one op (the backward without grad of grad), float32/float64.

    Not differentiable itself: with create_graph Silu's backward takes its composite path.
    """

    name = "silu_backward"
    differentiable = False

    def infer(self, g, x):
        return x.shape, x.dtype

    def forward(self, g, x):
        return self.device.kernels.silu_backward(g, x)


@public(method=True)
def silu(x: Tensor) -> Tensor:
    return apply(Silu(), x)


@public(sf=False, functional=True)
def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the two halves a, b of dim."""
    if input.dtype.is_complex:  # PyTorch's glu is for real numbers only
        from ..elementwise.complex_parts import refuse_complex

        refuse_complex("glu", input, hint="apply it to real(x) and imag(x)")
    d = normalize_dim(dim, input.ndim, "glu")
    n = input.shape[d] if input.ndim else 1
    if input.ndim == 0 or n % 2:
        raise ShapeRuntimeError(f"glu: halving dimension must be even, but dimension {d} is "
                                f"size {n}", op="glu", operands=[("input", describe(input))])
    a, b = input.chunk(2, d)
    return a * sigmoid(b)


@public(sf=False, functional=True)
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return input * tanh(softplus(input))


@public(sf=False, functional=True)
def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    return input * hardsigmoid(input)
