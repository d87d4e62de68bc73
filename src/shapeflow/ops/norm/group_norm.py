"""group_norm, written over the fused layer norm.

group_norm is layer_norm over [N, G, C/G * spatial] (its saved set: the input and [N, G]
mean and rstd, counted as normalization statistics), then a per-channel affine.
"""

from __future__ import annotations

import math

from ...errors import ShapeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from ..registry import public
from ._common import _affine
from .layer_norm import layer_norm


@public(sf=False, functional=True)
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize each of num_groups channel groups of [N, C, *spatial] per sample."""
    op = "group_norm"
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must be [N, C, *spatial], got "
                         f"{format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    N, C = input.shape[0], input.shape[1]
    if type(C) is int and C % num_groups:
        raise ShapeError(f"{op}: {C} channels (dim 1 of {format_shape(input.shape)}) are not "
                         f"divisible by num_groups {num_groups}", op=op,
                         operands=[("input", describe(input))],
                         hint="pick num_groups that divides the channel count")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or not dims_equal(t.shape[0], C)):
            raise ShapeError(f"{op}: {name} {format_shape(t.shape)} must be [C] with C = {C}",
                             op=op, operands=[("input", describe(input)), (name, describe(t))])
    per_group = C // num_groups * math.prod(input.shape[2:]) if input.ndim > 2 else \
        C // num_groups
    if all(type(d) is int for d in input.shape) and N * per_group == 1:
        # PyTorch's check (ValueError): each group's one value would normalize to 0
        raise ShapeError(f"{op}: expected more than 1 value per group, got input "
                         f"{format_shape(input.shape)} with num_groups {num_groups}", op=op,
                         operands=[("input", describe(input))],
                         hint="use fewer groups, or a larger batch or spatial size")
    x = input.reshape(N, num_groups, per_group)
    out = layer_norm(x, (per_group,), None, None, eps).reshape(input.shape)
    return _affine(out, weight, bias, input.ndim)
