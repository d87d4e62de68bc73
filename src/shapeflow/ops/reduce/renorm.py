"""renorm: each slice along dim whose p-norm exceeds maxnorm scaled down to maxnorm (the
slices of embedding tables and weights kept bounded). A composite of the p-norm and where."""

from __future__ import annotations

from ...errors import DTypeError, ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..registry import public
from .norm import norm


@public(method=True)
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:  # noqa: A002
    """input with each input.select(dim, i) of p-norm above maxnorm scaled by
    maxnorm / (norm + 1e-7), as PyTorch's (the others unchanged)."""
    from ..elementwise import where

    if not input.dtype.is_floating_point:
        raise DTypeError(f"renorm: expected a floating point tensor, got {input.dtype}",
                         op="renorm", operands=[("input", describe(input))])
    if p <= 0:
        raise ShapeRuntimeError(f"renorm: non-positive norm (p = {p}) is not supported",
                                op="renorm")
    if maxnorm < 0:
        raise ShapeRuntimeError(f"renorm: expected maxnorm to be >= 0, got {maxnorm}",
                                op="renorm")
    if input.ndim <= 1:
        raise ShapeRuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim}",
                                op="renorm", operands=[("input", describe(input))])
    d = normalize_dim(dim, input.ndim, "renorm")
    others = tuple(i for i in range(input.ndim) if i != d)
    norms = norm(input, p, dim=others, keepdim=True)
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return input * factor.to(input.dtype)
