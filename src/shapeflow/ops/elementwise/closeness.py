"""Closeness and equality: isclose (elementwise), allclose and equal (Python bools)."""

from __future__ import annotations

from ...device import meta
from ...errors import DeviceError
from ...tensor import Tensor, describe
from ..base import apply
from ..registry import public
from ._common import _as_operand
from .compare import Compare


class IsClose(Compare):
    """|a - b| <= atol + rtol * |b| elementwise; infinities are close only to themselves."""

    name = "isclose"

    def __init__(self, rtol: float, atol: float, equal_nan: bool) -> None:
        self.rtol, self.atol, self.equal_nan = rtol, atol, equal_nan

    def fn(self, a, b):
        xp = self.device.xp
        if a.dtype.kind in "biu":  # exact types: closeness is equality (and no overflow)
            return xp.equal(a, b)
        with xp.errstate(invalid="ignore", over="ignore"):
            return xp.isclose(a, b, rtol=self.rtol, atol=self.atol, equal_nan=self.equal_nan)

    def forward(self, a, b):
        if self.cast:
            npd = self.compute.np
            a, b = a.astype(npd, copy=False), b.astype(npd, copy=False)
        return self.fn(a, b)


@public(method=True)
def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """Whether each element of input is close to other's: |a - b| <= atol + rtol * |b|."""
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    other = other if isinstance(other, Tensor) else _as_operand(other, input)
    return apply(IsClose(rtol, atol, equal_nan), input, other)


def _values(op: str, *tensors: Tensor) -> None:
    for t in tensors:
        if t.device is meta:
            raise DeviceError(f"{op}: a meta tensor has no values to compare", op=op,
                              operands=[("input", describe(t))],
                              hint="compare shapes instead, or run on cpu")


@public(method=True)
def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element of input is close to other's (broadcast), as a Python bool."""
    _values("allclose", input, *([other] if isinstance(other, Tensor) else []))
    return bool(isclose(input, other, rtol, atol, equal_nan)._data.all())


@public(method=True)
def equal(input: Tensor, other: Tensor) -> bool:  # noqa: A002
    """True when both have the same shape and the same values (NaN equals nothing)."""
    _values("equal", input, other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(input.device.xp.array_equal(input._data, other._data))
