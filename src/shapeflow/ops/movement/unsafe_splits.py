"""PyTorch's unsafe_chunk and unsafe_split: chunk and split whose pieces autograd does not
check for in-place changes there. shapeflow's pieces are ordinary views, so these are the
same functions (checking costs nothing here)."""

from __future__ import annotations

from ...tensor import Tensor
from ..registry import public
from .joins import chunk, split


@public(method=True)
def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:  # noqa: A002
    """chunk(input, chunks, dim)."""
    return tuple(chunk(input, chunks, dim))


@public(method=True)
def unsafe_split(input: Tensor, split_size, dim: int = 0) -> tuple:  # noqa: A002
    """split(input, split_size, dim)."""
    return tuple(split(input, split_size, dim))
