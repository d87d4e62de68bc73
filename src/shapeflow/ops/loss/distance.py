"""The distances embedding losses compare: cosine_similarity and pairwise_distance
(PyTorch's F.* and torch.*, broadcasting their inputs)."""

from __future__ import annotations

from ...shape import broadcast_shapes
from ...tensor import Tensor
from ..linalg.norms import vector_norm
from ..registry import public


@public(functional=True)
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of x1 and x2 along dim (broadcast): each divided by max(its norm, eps), summed."""
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    if s1 != s2:  # dim counts in the broadcast shape, so norms are taken after expanding
        shape = tuple(broadcast_shapes(s1, s2, "cosine_similarity", ("x1", "x2")))
        x1, x2 = x1.expand(*shape), x2.expand(*shape)
    n1 = vector_norm(x1, 2, dim=dim, keepdim=True).clamp(min=eps)
    n2 = vector_norm(x2, 2, dim=dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


@public(functional=True)
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """p-norm of x1 - x2 + eps over the last dim (inputs broadcast)."""
    diff = x1 - x2 + eps
    if diff.dim() == 0:
        return vector_norm(diff.unsqueeze(0), p, dim=0, keepdim=keepdim)
    return vector_norm(diff, p, dim=-1, keepdim=keepdim)
