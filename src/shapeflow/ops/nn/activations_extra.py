"""More activations as PyTorch defines them: hardtanh/relu6, selu, celu, softsign, softmin,
logsigmoid, glu, mish, hardswish, hardsigmoid, prelu and the shrinks.

Hardtanh is a primitive (PyTorch's gradient is zero at and beyond the bounds, which clamp's
is not); the rest are short composites of differentiable primitives, so their gradients,
meta shapes and grad-of-grad come from those.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ArgumentError, DTypeError, ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import X0_ACT, Op, apply
from ..elementwise import abs as _abs
from ..elementwise import sigmoid, softplus, tanh, where, zeros_scalar_like
from .activation import elu
from .softmax import softmax

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

__all__ = ["hardtanh", "relu6", "selu", "celu", "softsign", "softmin", "logsigmoid", "glu",
           "mish", "hardswish", "hardsigmoid", "prelu", "tanhshrink", "softshrink",
           "hardshrink", "threshold", "rrelu", "Hardtanh"]


class Hardtanh(Op):
    """clamp(x, min_val, max_val) whose gradient passes only strictly inside the bounds."""

    name = "hardtanh"

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def infer(self, x):
        # integers clamp to the bounds truncated to ints, as PyTorch's; bools are refused
        if x.dtype is _dt.bool_:
            raise DTypeError(f"{self.name}: bool inputs are not supported", op=self.name,
                             operands=[("input", describe(x))])
        if x.dtype.category == 1 and not x.dtype.is_signed and self.lo < 0:
            raise ArgumentError(f"{self.name}: cannot clamp an unsigned type to negative "
                                f"limits ({self.lo})", op=self.name)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (X0_ACT,)

    def forward(self, x):
        t = x.dtype.type
        return self.device.xp.clip(x, t(self.lo), t(self.hi))

    def backward(self, g):
        (x,) = self.saved_tensors
        return (where((x > self.lo) & (x < self.hi), g, zeros_scalar_like(g)),)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """Clamp to [min_val, max_val] (gradient 1 strictly inside, 0 elsewhere)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return apply(Hardtanh(min_val, max_val), input)


def threshold(input: Tensor, threshold: float, value: float,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """input where it is above threshold, else value (gradient 1 above, 0 elsewhere)."""
    if not input.dtype.is_floating_point:  # integers take both truncated, as PyTorch
        threshold, value = int(threshold), int(value)
    dt = input.dtype  # a 0-d value of input's own dtype: where keeps that dtype
    fill = Tensor._make(input.device.asarray(value, dt.np), (), dt, input.device)
    return where(input > threshold, input, fill)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False, inplace: bool = False, generator=None) -> Tensor:
    """Randomized leaky ReLU: x, or x times a slope drawn from U(lower, upper) per negative
    element when training (their mean (lower + upper) / 2 otherwise)."""
    if not input.dtype.is_floating_point:
        raise DTypeError(f"rrelu: expected a floating point input, got {input.dtype}",
                         op="rrelu", operands=[("input", describe(input))])
    if lower > upper:
        raise ArgumentError(f"rrelu: lower bound ({lower}) must not exceed upper ({upper})",
                            op="rrelu")
    if not training:
        return where(input >= 0, input, input * ((lower + upper) / 2))
    from ...factories import empty
    from ..sampling import uniform_

    slopes = uniform_(empty(tuple(input.shape), dtype=input.dtype, device=input.device),
                      lower, upper, generator=generator)
    return where(input >= 0, input, input * slopes)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return apply(Hardtanh(0.0, 6.0), input)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return elu(input, SELU_ALPHA) * SELU_SCALE


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ArgumentError("celu: alpha cannot be 0 (ZeroDivisionError)", op="celu")
    return elu(input / alpha, 1.0) * alpha


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return input / (_abs(input) + 1.0)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """softmax(-x) along dim."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return softmax(-input, dim)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|."""
    return -softplus(-input)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """a * sigmoid(b) for the two halves a, b of dim."""
    d = normalize_dim(dim, input.ndim, "glu")
    n = input.shape[d] if input.ndim else 1
    if input.ndim == 0 or n % 2:
        raise ShapeRuntimeError(f"glu: halving dimension must be even, but dimension {d} is "
                                f"size {n}", op="glu", operands=[("input", describe(input))])
    a, b = input.chunk(2, d)
    return a * sigmoid(b)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x))."""
    return input * tanh(softplus(input))


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    return relu6(input + 3.0) * (1.0 / 6.0)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6."""
    return input * hardsigmoid(input)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """max(0, x) + weight * min(0, x); weight has 1 entry or one per channel (dim 1)."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight = _autocast.lower(input, weight)
    n = weight.numel()
    if n != 1:
        if input.ndim < 2 or input.shape[1] != n:
            c = input.shape[1] if input.ndim >= 2 else 1
            raise ShapeRuntimeError(
                f"prelu: mismatch of parameter numbers and input channel size: weight has "
                f"{n} entries, input has {c} channels", op="prelu",
                operands=[("input", describe(input)), ("weight", describe(weight))])
        weight = weight.reshape((n,) + (1,) * (input.ndim - 2))
    elif weight.ndim:
        weight = weight.reshape(())
    return where(input > 0, input, input * weight)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x)."""
    return input - tanh(input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise ArgumentError(f"softshrink: lambda must be greater or equal to 0, got {lambd}",
                            op="softshrink")
    zero = zeros_scalar_like(input)
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, zero))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    return where((input > lambd) | (input < -lambd), input, zeros_scalar_like(input))

