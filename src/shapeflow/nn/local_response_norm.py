"""nn.LocalResponseNorm, the layer of F.local_response_norm (ops/norm/local_response_norm.py):
each value divided by the summed squares of its channel neighbours."""

from __future__ import annotations

from ..ops.norm import local_response_norm
from ..tensor import Tensor
from .module import Module


class LocalResponseNorm(Module):
    """nn.LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0) over [N, C, *]."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
