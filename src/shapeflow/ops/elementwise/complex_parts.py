"""PyTorch's complex-number functions on real tensors (shapeflow has no complex dtypes
yet): real, conj, resolve_conj and resolve_neg give x itself, conj_physical a copy, isreal
all True, angle 0 or pi (NaN stays NaN) with a zero gradient, as PyTorch does for real input.
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...dtypes import INT_TO_FLOAT, promote
from ...tensor import Tensor
from ..base import Op, apply
from ..registry import public
from .casts import cast


@public()
def real(input: Tensor) -> Tensor:  # noqa: A002
    """The real part: input itself for a real tensor."""
    return input


@public(method=True)
def conj(input: Tensor) -> Tensor:  # noqa: A002
    """The complex conjugate: input itself for a real tensor."""
    return input


@public(method=True)
def resolve_conj(input: Tensor) -> Tensor:  # noqa: A002
    """input with a lazy conjugation applied: input itself (shapeflow conjugates nothing lazily)."""
    return input


@public(method=True)
def resolve_neg(input: Tensor) -> Tensor:  # noqa: A002
    """input with a lazy negation applied: input itself (shapeflow negates nothing lazily)."""
    return input


@public(method=True)
def conj_physical(input: Tensor) -> Tensor:  # noqa: A002
    """The conjugate as a new tensor: a copy of a real tensor (differentiable)."""
    return input.clone()


@public(method=True)
def isreal(input: Tensor) -> Tensor:  # noqa: A002
    """Whether each element is real (imaginary part 0): all True for a real tensor."""
    from ...factories import ones

    return ones(tuple(input.shape), dtype=_dt.bool_, device=input.device)


class Angle(Op):
    """The argument of a real number: pi below 0, else 0; NaN stays NaN; gradient zero."""

    name = "angle"
    promotion = INT_TO_FLOAT

    def infer(self, x):
        self.dt = promote(self.promotion, x)
        return x.shape, self.dt

    def forward(self, x):
        xp = self.device.xp
        out = xp.where(x < 0, math.pi, 0.0).astype(self.dt.np)
        if x.dtype.kind == "f":
            out = xp.where(xp.isnan(x), x, out).astype(self.dt.np)
        return out

    def backward(self, g):
        return (g * 0.0,)  # angle is constant on either side of 0 (PyTorch's gradient)


@public(method=True)
def angle(input: Tensor) -> Tensor:  # noqa: A002
    """The elementwise argument (angle in radians) of a real tensor: 0 or pi."""
    if input.dtype is _dt.bool_:
        input = cast(input, _dt.get_default_dtype())
    return apply(Angle(), input)
