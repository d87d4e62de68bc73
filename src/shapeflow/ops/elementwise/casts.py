"""Casts to another dtype and moves to another device."""

from __future__ import annotations

from ... import dtypes as _dt
from ...device import Device
from ...dtypes import DType
from ...errors import DeviceError
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..registry import public


class Cast(Op):
    name = "to"

    def __init__(self, dtype: DType) -> None:
        self.dtype = dtype

    def infer(self, x):
        return x.shape, self.dtype

    def forward(self, x):
        # float32 <-> bfloat16 in one compiled pass on cpu (ml_dtypes' cast is ~4x slower)
        return self.device.kernels.cast(x, self.dtype.np)

    def backward(self, g):
        return (g,)  # the engine casts the gradient back to the input's dtype


class CastToInt(Cast):
    """A cast to an integer or bool dtype: no gradient flows through it."""

    differentiable = False


class ComplexCast(Cast):
    """A cast to or from a complex dtype: complex to real keeps the real part (as PyTorch,
    without NumPy's warning); a real input's gradient is the real part of g."""

    def infer(self, x):
        self.from_complex = x.dtype.is_complex
        return x.shape, self.dtype

    def forward(self, x):
        if self.from_complex and not self.dtype.is_complex:
            x = x.real
        return self.device.kernels.cast(x, self.dtype.np)

    def backward(self, g):
        if g.dtype.is_complex and not self.from_complex:
            from .complex_parts import real

            return (real(g),)
        return (g,)


class ComplexToInt(ComplexCast):
    differentiable = False


@public()
def cast(x: Tensor, dtype) -> Tensor:
    dt = _dt.get_dtype(dtype)
    if dt.is_floating_point and not x.dtype.is_complex:
        return apply(Cast(dt), x)
    if dt.is_complex or x.dtype.is_complex:
        return apply((ComplexToInt if dt.is_integer or dt.is_bool else ComplexCast)(dt), x)
    return apply(CastToInt(dt), x)


def to_device(x: Tensor, device: Device) -> Tensor:
    """Move to another device. A new leaf that keeps requires_grad (as moving a parameter)."""
    if device.computes and not x.device.computes:
        raise DeviceError(
            f"cannot move a {x.device} tensor {describe(x)} to {device}: it has no data",
            op="to", hint=f"create the tensor on {device}, or initialise parameters after "
            "moving (Module.to_empty)",
        )
    # through host memory: each device knows only its own arrays and NumPy's
    data = device.from_numpy(x.device.to_numpy(x._data)) if device.computes else None
    out = Tensor._make(data, x.shape, x.dtype, device)
    out.requires_grad = x.requires_grad and x.grad_fn is None
    return out

