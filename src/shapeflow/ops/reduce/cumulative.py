"""cumsum: a running sum along one dim."""

from __future__ import annotations

from ... import dtypes as _dt
from ...dtypes import INT_TO_LONG, promote
from ...tensor import Tensor
from ..base import Op, apply
from ..registry import public
from ._common import _int64, _one_dim


class Cumsum(Op):
    """Running sum along one dim; its gradient is the reversed running sum."""

    name = "cumsum"
    promotion = INT_TO_LONG  # PyTorch sums ints and bools as int64

    def __init__(self, dim: int, reverse: bool = False) -> None:
        self.dim, self.reverse = dim, reverse

    def infer(self, x):
        self.d = _one_dim(self.dim, x, self.name)
        dt = x.dtype
        return x.shape, dt if dt.is_floating_point else promote(self.promotion, dt)

    def forward(self, x):
        xp = self.device.xp
        dt = _int64.np if x.dtype.kind in "biu" else x.dtype
        if x.ndim == 0:
            return x.astype(dt)
        # 16-bit floats run in float32 and round once per element, as PyTorch's do
        acc = _dt.float32.np if dt.itemsize == 2 and x.dtype.kind not in "biu" else dt
        if self.reverse:
            out = xp.flip(xp.cumsum(xp.flip(x, self.d), axis=self.d, dtype=acc), self.d)
            return out.astype(dt) if acc is not dt else out.copy()
        out = xp.cumsum(x, axis=self.d, dtype=acc)
        return out if acc is dt else out.astype(dt)

    def backward(self, g):
        return (apply(Cumsum(self.d, not self.reverse), g),)


@public(method=True)
def cumsum(x: Tensor, dim: int, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    return apply(Cumsum(dim), x)
