"""`x.view(dtype)`: the same bytes read as another dtype, as PyTorch's view(dtype)."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ShapeRuntimeError
from ...tensor import Tensor, describe
from ..base import Op, apply


class ViewDtype(Op):
    """Reinterpret the bytes; a different element size rescales the last dim (stride 1)."""

    name = "view"
    differentiable = False
    is_view = True

    def __init__(self, dtype: _dt.DType) -> None:
        self.dtype = dtype

    def infer(self, x):
        new, old = self.dtype.itemsize, x.dtype.itemsize
        if new == old:
            return x.shape, self.dtype
        what = f"to view {x.dtype} as {self.dtype} (different element sizes)"
        if x.ndim == 0:
            raise ShapeRuntimeError(f"view: self.dim() cannot be 0 {what}", op="view",
                                    operands=[("input", describe(x))])
        if x._data is not None and x.shape[-1] != 1 and x._data.strides[-1] != old:
            raise ShapeRuntimeError(f"view: self.stride(-1) must be 1 {what}", op="view",
                                    operands=[("input", describe(x))],
                                    hint="call .contiguous() first")
        last = x.shape[-1]
        if new > old:
            ratio = new // old
            if last % ratio:
                raise ShapeRuntimeError(
                    f"view: self.size(-1) must be divisible by {ratio} {what}, but got "
                    f"{last}", op="view", operands=[("input", describe(x))])
            last = last // ratio
        else:
            last = last * (old // new)
        return (*x.shape[:-1], last), self.dtype

    def forward(self, x):
        if x.ndim and x.shape[-1] == 1 and x.strides[-1] != x.itemsize:
            x = self.device.xp.lib.stride_tricks.as_strided(
                x, strides=(*x.strides[:-1], x.itemsize))
        return x.view(self.dtype.np)


def view_dtype(x: Tensor, dtype) -> Tensor:
    """The same memory read as `dtype` (shares x's version counter, as a view)."""
    dt = _dt.get_dtype(dtype)
    if dt is x.dtype:
        return x
    out = apply(ViewDtype(dt), x)
    out._version = x._version
    out._base = x if x._base is None else x._base
    return out
