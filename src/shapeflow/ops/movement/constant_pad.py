"""constant_pad_nd: aten's name for pad(mode="constant"), which torch exposes at the top."""

from __future__ import annotations

from ...tensor import Tensor
from ..registry import public


@public()
def constant_pad_nd(input: Tensor, pad, value=0) -> Tensor:  # noqa: A002
    """input padded with value: pad lists (before, after) sizes from the last dim backwards."""
    from .padding import pad as _pad

    return _pad(input, tuple(pad), mode="constant", value=value)
