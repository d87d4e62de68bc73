"""A complex tensor and its pairs of floats as views of one memory: view_as_real gives
[..., 2] (real, imaginary) floats, view_as_complex reads [..., 2] floats as complex."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeRuntimeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from .. import meta_layout as _meta
from ..base import Op
from ..registry import public


def _fresh_layout(shape: tuple):
    """A C-contiguous meta layout of `shape` (a view of a contiguous layout stays one)."""
    return _meta.host.lib.stride_tricks.as_strided(_meta._BYTE, shape, _meta._contiguous(shape),
                                                   writeable=False)


def _view_apply(op: Op, x: Tensor) -> Tensor:
    from ..movement.views import _view_apply as view_apply  # (movement imports this family)

    return view_apply(op, x)


class View(Op):
    """A view of the input's memory under another dtype (as movement's views)."""

    is_view = True


class ViewAsReal(View):
    name = "view_as_real"

    def infer(self, x):
        if not x.dtype.is_complex:
            raise DTypeRuntimeError("view_as_real is only supported for complex tensors",
                                    op=self.name, operands=[("input", describe(x))])
        self.out_shape = (*x.shape, 2)
        return self.out_shape, _dt.to_real(x.dtype)

    def forward(self, x):
        parts = x.real  # the real floats, with x's strides in bytes: pairs lie half apart
        return self.device.xp.lib.stride_tricks.as_strided(
            parts, (*x.shape, 2), (*x.strides, x.itemsize // 2))

    def meta_layout(self, arr):
        return _fresh_layout(self.out_shape) if arr.flags.c_contiguous else None

    def backward(self, g):
        return (view_as_complex(g.contiguous()),)


class ViewAsComplex(View):
    name = "view_as_complex"

    def infer(self, x):
        ops = [("input", describe(x))]
        if x.dtype not in (_dt.float32, _dt.float64):
            raise DTypeRuntimeError(
                f"view_as_complex is only supported for float and double tensors, but got a "
                f"tensor of scalar type: {x.dtype}", op=self.name, operands=ops)
        if x.ndim == 0 or x.shape[-1] != 2:
            raise ShapeRuntimeError("Tensor must have a last dimension of size 2",
                                    op=self.name, operands=ops,
                                    hint="reshape to [..., 2] (real, imaginary) pairs first")
        data = x._data
        if data is not None:
            item = data.itemsize
            if data.strides[-1] != item:
                raise ShapeRuntimeError("Tensor must have a last dimension with stride 1",
                                        op=self.name, operands=ops, hint="call .contiguous()")
            if any(s % (2 * item) for s, n in zip(data.strides[:-1], data.shape) if n > 1):
                raise ShapeRuntimeError(
                    "Tensor must have a stride divisible by 2 for all but last dimension",
                    op=self.name, operands=ops, hint="call .contiguous()")
        self.out_shape = tuple(x.shape[:-1])
        return self.out_shape, _dt.to_complex(x.dtype)

    def forward(self, x):
        cdt = _dt.to_complex(_dt.from_numpy_dtype(x.dtype)).np
        if x.ndim == 1 or x.strides[-2] % cdt.itemsize == 0:
            return x.view(cdt)[..., 0]
        return self.device.xp.ascontiguousarray(x).view(cdt)[..., 0]  # an odd stride: a copy

    def meta_layout(self, arr):
        return _fresh_layout(self.out_shape) if arr.flags.c_contiguous else None

    def backward(self, g):
        return (view_as_real(g),)


@public()
def view_as_real(input: Tensor) -> Tensor:  # noqa: A002
    """A complex tensor's memory as floats of shape [..., 2] (real, imaginary): a view."""
    return _view_apply(ViewAsReal(), input)


@public()
def view_as_complex(input: Tensor) -> Tensor:  # noqa: A002
    """Floats of shape [..., 2] read as complex numbers of shape [...]: a view."""
    return _view_apply(ViewAsComplex(), input)
