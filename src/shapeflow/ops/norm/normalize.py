"""normalize: each slice divided by its p-norm along a dim (PyTorch's F.normalize)."""

from __future__ import annotations

from ...tensor import Tensor
from ..registry import public


@public(sf=False, functional=True)
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """input / max(||input||_p over dim, eps) (PyTorch's F.normalize)."""
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)
