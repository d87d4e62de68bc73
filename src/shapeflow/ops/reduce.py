"""Reductions over dims: sum, mean, ... (dim: int, tuple or None; negative ok; keepdim)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..shape import normalize_dims, prod_dims
from ..tensor import Tensor
from .base import Op, apply


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


class Reduction(Op):
    """Reduce `dims` of the input; subclasses give fn and the output dtype."""

    def __init__(self, dim, keepdim: bool = False) -> None:
        self.dim, self.keepdim = dim, keepdim

    def infer(self, x):
        self.dims = normalize_dims(self.dim, x.ndim, self.name)
        self.in_shape = x.shape
        return reduced_shape(x.shape, self.dims, self.keepdim), self.out_dtype(x.dtype)

    def out_dtype(self, dt):
        return dt

    def expand_grad(self, g: Tensor) -> Tensor:
        """The output gradient broadcast back over the reduced dims."""
        if not self.keepdim and self.dims:
            g = g.reshape(reduced_shape(self.in_shape, self.dims, True))
        return g.expand(self.in_shape)


class Sum(Reduction):
    name = "sum"

    def out_dtype(self, dt):
        return _dt.int64 if dt.category < 2 else dt  # PyTorch sums ints and bools as int64

    def forward(self, x):
        return np.sum(x, axis=self.dims, keepdims=self.keepdim, dtype=self.out_dtype(
            _dt.from_numpy_dtype(x.dtype)).np)

    def backward(self, g):
        return (self.expand_grad(g),)


class Mean(Reduction):
    name = "mean"

    def out_dtype(self, dt):
        return dt if dt.category == 2 else _dt.default_float

    def forward(self, x):
        dt = self.out_dtype(_dt.from_numpy_dtype(x.dtype)).np
        return np.mean(x, axis=self.dims, keepdims=self.keepdim, dtype=dt).astype(dt, copy=False)

    def backward(self, g):
        n = prod_dims(self.in_shape[d] for d in self.dims)
        return (self.expand_grad(g / n),)


def sum(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A001
    out = apply(Sum(dim, keepdim), x)
    return out if dtype is None else out.to(dtype)


def mean(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    return apply(Mean(dim, keepdim), x)


METHODS = ("sum", "mean")
__all__ = list(METHODS)
