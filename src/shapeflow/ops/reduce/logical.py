"""all and any over dims."""

from __future__ import annotations

from ... import dtypes as _dt
from ...tensor import Tensor
from ..base import apply
from ..registry import public
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
        xp = self.device.xp
        fn = xp.all if self.name == "all" else xp.any
        out = fn(x, axis=self.dims, keepdims=self.keepdim)
        keep = x.dtype == _dt.uint8.np  # PyTorch: uint8 in, uint8 out
        return xp.asarray(out).astype(x.dtype if keep else _dt.bool_.np, copy=False)


@public(method=True)
def all(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return apply(AllAny(dim, keepdim, "all"), x)


@public(method=True)
def any(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return apply(AllAny(dim, keepdim, "any"), x)
