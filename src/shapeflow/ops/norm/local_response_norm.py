"""Local response normalization (AlexNet's): each value divided by the summed squares of its
channel neighbours, PyTorch's F.local_response_norm."""

from __future__ import annotations

from ...errors import ShapeError
from ...shape import format_shape
from ...tensor import Tensor
from ..movement import pad
from ..registry import public


@public(sf=False, functional=True)
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels) ** beta, over
    [N, C, *]: the window is centred (size // 2 before, (size - 1) // 2 after) and padded
    with zeros, which count in the mean (as PyTorch's avg_pool does)."""
    if input.ndim < 3:
        raise ShapeError(f"local_response_norm: expected [N, C, *] (3-D or more), got "
                         f"{input.ndim}-D input {format_shape(input.shape)}",
                         op="local_response_norm", hint="add a batch dim with x.unsqueeze(0)"
                         if input.ndim == 2 else None)
    if not isinstance(size, int) or size < 1:
        raise ShapeError(f"local_response_norm: size must be a positive int, got {size!r}",
                         op="local_response_norm")
    C = input.shape[1]
    # zeros before and after the channels, then a sum of `size` shifted channel windows
    sq = pad(input * input, (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2))
    acc = sq[:, 0:C]
    for i in range(1, size):
        acc = acc + sq[:, i:i + C]
    return input / ((acc / size) * alpha + k) ** beta
