"""Layers' functions that mix features: bilinear (x1^T W x2 + b per output feature) and
channel_shuffle (ShuffleNet's interleaving of channel groups). Composites of tensordot,
reshape and transpose: gradients and meta shapes come from those."""

from __future__ import annotations

from ...errors import ShapeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..registry import public


@public(sf=False, functional=True)
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """[..., out]: sum_ij input1[..., i] * weight[out, i, j] * input2[..., j] (+ bias)."""
    from ..linalg.products import tensordot

    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or \
            input2.shape[-1] != weight.shape[2] or tuple(input1.shape[:-1]) != \
            tuple(input2.shape[:-1]):
        raise ShapeError("bilinear: expected input1 [..., in1], input2 [..., in2] with the same "
                         "leading dims and weight [out, in1, in2]", op="bilinear",
                         operands=[("input1", describe(input1)), ("input2", describe(input2)),
                                   ("weight", describe(weight))])
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ShapeError(f"bilinear: bias must be [{weight.shape[0]}], got {describe(bias)}",
                         op="bilinear", operands=[("bias", describe(bias))])
    mixed = tensordot(input1, weight, ([-1], [1]))  # [..., out, in2]
    out = (mixed * input2.unsqueeze(-2)).sum(-1)
    return out if bias is None else out + bias


@public(sf=False, functional=True)
def channel_shuffle(input: Tensor, groups: int) -> Tensor:  # noqa: A002
    """[N, C, *]: channels taken group by group, interleaved (C divisible by groups)."""
    if input.ndim <= 2:
        raise ShapeRuntimeError(f"channel_shuffle expects input with > 2 dims, got "
                                f"{describe(input)}", op="channel_shuffle",
                                operands=[("input", describe(input))])
    if groups <= 0:
        raise ShapeRuntimeError(f"channel_shuffle: number of groups to divide channels in "
                                f"must be positive, got {groups}", op="channel_shuffle")
    n, c = input.shape[0], input.shape[1]
    if c % groups:
        raise ShapeRuntimeError(f"channel_shuffle: number of channels must be divisible by "
                                f"groups, got {c} channels and {groups} groups",
                                op="channel_shuffle", operands=[("input", describe(input))])
    rest = tuple(input.shape[2:])
    out = input.reshape((n, groups, c // groups) + rest).transpose(1, 2)
    return out.reshape((n, c) + rest)
