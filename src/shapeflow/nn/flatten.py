"""Flatten and Unflatten: reshape a range of dims into one, and one dim into several."""

from __future__ import annotations

from ..errors import ShapeError
from ..shape import normalize_dim
from .module import Module


class Flatten(Module):
    """Merge dims start_dim..end_dim into one (the batch dim stays by default)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        shape = tuple(input.shape)
        # a 0-d input counts as one dim, as PyTorch's: only dims 0 and -1 name it
        s = normalize_dim(self.start_dim, max(len(shape), 1), "Flatten")
        e = normalize_dim(self.end_dim, max(len(shape), 1), "Flatten")
        if not shape:
            return input.reshape(1)
        if s > e:
            raise ShapeError("flatten() has invalid args: start_dim cannot come after end_dim")
        merged = 1
        for size in shape[s:e + 1]:
            merged = merged * size
        return input.reshape(shape[:s] + (merged,) + shape[e + 1:])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim `dim` into `unflattened_size` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        shape = tuple(input.shape)
        d = normalize_dim(self.dim, len(shape), "Unflatten")
        return input.reshape(shape[:d] + tuple(self.unflattened_size) + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
