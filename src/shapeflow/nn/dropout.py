"""Dropout."""

from __future__ import annotations

from ..errors import ShapeError
from . import functional as F
from .module import Module


class Dropout(Module):
    """In training, zero each element with probability p and scale the rest by 1/(1-p)."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ShapeError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
