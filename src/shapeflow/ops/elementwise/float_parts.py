"""A float's parts and neighbours: frexp (mantissa and exponent), ldexp (x * 2**e),
nextafter, and heaviside (the step function with a value at 0).

frexp's mantissa is differentiable (its gradient is g / 2**exponent, as PyTorch's); ldexp is
a composite of pow and mul; nextafter passes the gradient to input, as PyTorch's;
heaviside has none.
"""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...errors import DTypeError, DTypeNotImplementedError
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..registry import public
from ._common import _as_operand
from .binary import Binary, mul, pow

# torch.return_types.frexp: a tuple with .mantissa and .exponent
FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


def _need_float(op: str, x) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeNotImplementedError(f"{op}: only supports floating-point dtypes, got "
                                       f"{x.dtype}", op=op, operands=[("input", describe(x))],
                                       hint="cast with .to(sf.float32) first")


class Exponent(Op):
    """The int32 exponent e of x = m * 2**e with 0.5 <= |m| < 1 (0 for 0, inf and NaN)."""

    name = "frexp"
    differentiable = False

    def infer(self, x):
        _need_float(self.name, x)
        return x.shape, _dt.int32

    def forward(self, x):
        xp = self.device.xp
        wide = x.astype(xp.float32) if x.dtype.itemsize == 2 else x
        return xp.frexp(wide)[1].astype(xp.int32)


@public(method=True)
def frexp(input: Tensor) -> FrexpResult:  # noqa: A002
    """(mantissa, exponent) with input = mantissa * 2**exponent, 0.5 <= |mantissa| < 1."""
    exponent = apply(Exponent(), input)
    # the mantissa as input / 2**e: exact (a power of two), and differentiable for free
    scale = pow(2.0, exponent.to(input.dtype))
    return FrexpResult(input / scale, exponent)


@public(method=True)
def ldexp(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """input * 2**other (integers give the default float dtype), as PyTorch computes it."""
    other = _as_operand(other, input if isinstance(input, Tensor) else None)
    return mul(input, pow(2.0, other))


class NextAfter(Binary):
    """The next float after a in the direction of b."""

    name = "nextafter"

    def fn(self, a, b):
        return self.device.xp.nextafter(a, b)

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if not dt.is_floating_point:
            raise DTypeNotImplementedError(f"nextafter: not implemented for {dt}", op=self.name,
                                           operands=[("input", describe(a)),
                                                     ("other", describe(b))])
        return shape, dt

    def backward(self, g):
        return g, None  # a step of one ulp: PyTorch passes the gradient through to input


@public(method=True)
def nextafter(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The next representable float after input towards other, elementwise."""
    other = _as_operand(other, input)
    return apply(NextAfter(), input, other)


class Heaviside(Binary):
    """0 where x < 0, values where x == 0, 1 where x > 0 (NaN stays NaN)."""

    name = "heaviside"
    differentiable = False

    def infer(self, a, b):
        if a.dtype.is_complex or b.dtype.is_complex:  # a step needs an order, as PyTorch says
            from .complex_parts import refuse_complex

            refuse_complex(self.name, a, b)
        if a.dtype is not b.dtype:
            raise DTypeError("heaviside is not yet implemented for tensors with different "
                             f"dtypes ({a.dtype} and {b.dtype})", op=self.name,
                             operands=[("input", describe(a)), ("values", describe(b))],
                             hint="cast values to input's dtype")
        return Binary.infer(self, a, b)

    def fn(self, x, v):
        xp = self.device.xp
        if x.dtype == xp.bool_:  # a bool x is never below 0: v where False, True where True
            return x | v
        return xp.where(x == 0, v, (x > 0).astype(x.dtype) if x.dtype.kind != "f"
                        else xp.where(xp.isnan(x), x, (x > 0).astype(x.dtype)))


@public(method=True)
def heaviside(input: Tensor, values: Tensor) -> Tensor:  # noqa: A002
    """The Heaviside step of input, values where input is 0."""
    return apply(Heaviside(), input, _as_operand(values, input))
