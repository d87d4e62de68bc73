"""Helpers the norm files share: the per-channel affine of [N, C, *spatial] outputs."""

from __future__ import annotations

from ...tensor import Tensor


def _affine(out: Tensor, weight, bias, ndim: int) -> Tensor:
    shape = (1, -1) + (1,) * (ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out
