"""all and any over dims."""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...tensor import Tensor
from ..base import apply
from ._common import Reduction


class AllAny(Reduction):
    differentiable = False
    empty_is_all = False  # PyTorch: all(x, dim=()) reduces nothing

    def __init__(self, dim, keepdim: bool, name: str) -> None:
        super().__init__(dim, keepdim)
        self.name = name

    def out_dtype(self, dt):
        return dt if dt is _dt.uint8 else _dt.bool_

    def forward(self, x):
        fn = np.all if self.name == "all" else np.any
        out = fn(x, axis=self.dims, keepdims=self.keepdim)
        return np.asarray(out).astype(x.dtype if x.dtype == np.uint8 else np.bool_, copy=False)


def all(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return apply(AllAny(dim, keepdim, "all"), x)


def any(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return apply(AllAny(dim, keepdim, "any"), x)
