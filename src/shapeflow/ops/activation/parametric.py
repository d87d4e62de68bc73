"""Leaky ReLUs whose negative slope is a weight or a random draw: prelu and rrelu."""

from __future__ import annotations

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ArgumentError, DTypeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..elementwise import where
from ..registry import public


@public(functional=True)
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


@public(sf=False, functional=True)
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
