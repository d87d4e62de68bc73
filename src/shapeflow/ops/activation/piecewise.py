"""Piecewise-linear activations: relu, leaky_relu, hardtanh/relu6, threshold, hardsigmoid and
the shrinks (softshrink, hardshrink).

Relu, LeakyRelu and Hardtanh are primitives (PyTorch's hardtanh gradient is zero at and
beyond the bounds, which clamp's is not); the rest are composites of `where` and those.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd import grad_mode
from ...errors import ArgumentError, ArgumentValueError, DTypeError
from ...tensor import Tensor, describe
from ..base import OUT_ACT, X0_ACT, Op, apply
from ..elementwise import where, zeros_scalar_like
from ..elementwise._common import refuse_dtype
from ..nn._common import _need_float
from ..registry import public
from ._common import _GradKernel


class Relu(Op):
    name = "relu"

    def infer(self, x):
        if x.dtype is _dt.bool_:
            refuse_dtype(self.name, x, runtime=True)  # PyTorch: RuntimeError
        if x.dtype.is_complex:  # PyTorch has no order of complex numbers
            from ..elementwise.complex_parts import refuse_complex

            refuse_complex(self.name, x)
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


class ReluBackward(_GradKernel):
    """g * (out > 0) as one op."""

    name = "relu_backward"

    def forward(self, g, out):
        return g * (out > 0)


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
        if x.dtype.is_complex:  # PyTorch has no order of complex numbers
            from ..elementwise.complex_parts import refuse_complex

            refuse_complex(self.name, x)
        if x.dtype.is_integer and not x.dtype.is_signed and self.lo < 0:
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


@public(method=True)
def relu(x: Tensor) -> Tensor:
    return apply(Relu(), x)


@public(sf=False, functional=True)
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return apply(LeakyRelu(negative_slope), input)


@public(sf=False, functional=True)
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """Clamp to [min_val, max_val] (gradient 1 strictly inside, 0 elsewhere)."""
    if min_val > max_val:
        raise ArgumentValueError("min_val cannot be greater than max_val")
    return apply(Hardtanh(min_val, max_val), input)


@public(sf=False, functional=True)
def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    return apply(Hardtanh(0.0, 6.0), input)


@public(sf=False, functional=True)
def threshold(input: Tensor, threshold: float, value: float,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """input where it is above threshold, else value (gradient 1 above, 0 elsewhere)."""
    if not input.dtype.is_floating_point:  # integers take both truncated, as PyTorch
        threshold, value = int(threshold), int(value)
    dt = input.dtype  # a 0-d value of input's own dtype: where keeps that dtype
    fill = Tensor._make(input.device.asarray(value, dt.np), (), dt, input.device)
    return where(input > threshold, input, fill)


@public(sf=False, functional=True)
def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    return relu6(input + 3.0) * (1.0 / 6.0)


@public(sf=False, functional=True)
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise ArgumentError(f"softshrink: lambda must be greater or equal to 0, got {lambd}",
                            op="softshrink")
    zero = zeros_scalar_like(input)
    return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, zero))


@public(method=True, functional=True)
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0."""
    return where((input > lambd) | (input < -lambd), input, zeros_scalar_like(input))
