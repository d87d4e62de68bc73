"""softmin: softmax of -x along a dim, PyTorch's F.softmin (dim chosen as it does)."""

from __future__ import annotations

from ...tensor import Tensor
from ..nn.softmax import softmax
from ..registry import public


@public(sf=False, functional=True)
def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """softmax(-x) along dim."""
    if dtype is not None:
        input = input.to(dtype)
    if dim is None:
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return softmax(-input, dim)
