"""Greatest common divisor and least common multiple of integer tensors (non-negative
results, gcd(0, 0) = 0, as PyTorch's); floats raise."""

from __future__ import annotations

from ...errors import DTypeNotImplementedError
from ...tensor import Tensor, describe
from ..base import apply
from ..registry import public
from ._common import _as_operand
from .binary import Binary


class _IntegerBinary(Binary):
    differentiable = False

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if not dt.is_integer:  # floats and bools have no divisors
            raise DTypeNotImplementedError(
                f"{self.name}: not implemented for {dt}", op=self.name,
                operands=[("input", describe(a)), ("other", describe(b))],
                hint="gcd and lcm take integer tensors")
        return shape, dt


class Gcd(_IntegerBinary):
    name = "gcd"

    def fn(self, a, b):
        return self.device.xp.gcd(a, b)


class Lcm(_IntegerBinary):
    name = "lcm"

    def fn(self, a, b):
        return self.device.xp.lcm(a, b)


@public(method=True)
def gcd(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The greatest common divisor of input and other, elementwise."""
    return apply(Gcd(), input, _as_operand(other, input))


@public(method=True)
def lcm(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The least common multiple of input and other, elementwise."""
    return apply(Lcm(), input, _as_operand(other, input))
