"""A tensor with a Python number (`x + 2`, `2 ** x`): no broadcasting, scalar promotion."""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ...backend.cpu import kernels
from ...dtypes import DType, promote_types, result_type
from ..base import OUT, X0, Op

_BOOL_NP = np.dtype(np.bool_)


class ScalarOp(Op):
    """x (op) c for a Python number c: no broadcasting, PyTorch's scalar promotion."""

    def __init__(self, c) -> None:
        self.c = c

    def infer(self, x):
        self.dt = self.out_dtype(scalar_result_type(x.dtype, self.c))
        return x.shape, self.dt

    def out_dtype(self, dt: DType) -> DType:
        return dt

    def forward(self, x):
        npd = self.dt.np
        if npd.itemsize == 2 and npd.kind not in "iu":  # bfloat16/float16
            return self.half(x.astype(npd, copy=False), npd)
        if x.dtype != npd:
            x = x.astype(npd)
        try:
            out = self.fn(x, self.c)
        except OverflowError:  # uint8 - 2: PyTorch wraps the number into the dtype
            return self.fn(x, np.asarray(self.c).astype(npd))
        if npd is _BOOL_NP and out.dtype != npd:  # bool ** True stays bool in PyTorch
            out = out.astype(npd)
        return out


    # PyTorch's CPU kernels for 16-bit floats: mul and div take the number in float32,
    # the others round it to the tensor's dtype first; all compute in float32, round once
    opmath_scalar = False

    def half(self, x, npd):
        """fn on a bfloat16/float16 array, in float32, with PyTorch's scalar handling."""
        c = self.c if self.opmath_scalar or type(self.c) is bool else \
            float(np.asarray(self.c, np.float64).astype(npd))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return kernels.narrow(np.asarray(self.fn(kernels.widen(x), c)), npd)


def scalar_result_type(dt: DType, c) -> DType:
    """A tensor of dtype dt with a Python number: the number widens only across categories."""
    tc = type(c)
    if tc is float:
        return dt if dt.category == 2 else _dt.default_float
    if tc is int:
        return dt if dt.category >= 1 else _dt.default_int
    if tc is bool:
        return dt
    return promote_types(dt, result_type(c))


def _quiet(fn):
    """A NumPy function with division and overflow warnings off (PyTorch gives inf/nan)."""

    def quiet(*args):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(*args)

    return staticmethod(quiet)


class AddScalar(ScalarOp):
    name = "add"
    fn = staticmethod(np.add)

    def backward(self, g):
        return (g,)


class RSubScalar(ScalarOp):
    name = "rsub"
    fn = staticmethod(lambda x, c: np.subtract(c, x))

    def infer(self, x):
        if x.dtype is _dt.bool_ or type(self.c) is bool:
            from .binary import _bool_subtraction

            raise _bool_subtraction()
        return ScalarOp.infer(self, x)

    def backward(self, g):
        return (-g,)


class MulScalar(ScalarOp):
    name = "mul"
    fn = staticmethod(np.multiply)
    opmath_scalar = True

    def backward(self, g):
        return (g * self.c,)


class _FloatScalar(ScalarOp):
    def out_dtype(self, dt):
        return dt if dt.is_floating_point else _dt.default_float


class DivScalar(_FloatScalar):
    name = "div"
    fn = _quiet(np.true_divide)
    opmath_scalar = True

    def backward(self, g):
        return (g / self.c,)


class RDivScalar(_FloatScalar):
    name = "rdiv"
    fn = _quiet(lambda x, c: np.true_divide(c, x))

    def half(self, x, npd):
        # PyTorch's c / x is x.reciprocal() * c: two roundings for 16-bit floats
        with np.errstate(divide="ignore"):
            r = kernels.narrow(np.asarray(np.reciprocal(kernels.widen(x))), npd)
        return kernels.narrow(np.asarray(kernels.widen(r) * np.float32(self.c)), npd)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * (-self.c) / (x * x),)


class PowScalar(ScalarOp):
    name = "pow"
    fn = _quiet(np.power)

    def infer(self, x):
        shape, dt = ScalarOp.infer(self, x)
        if dt.category < 2 and type(self.c) is int and self.c < 0:
            from ...errors import DTypeRuntimeError

            raise DTypeRuntimeError("Integers to negative integer powers are not allowed.",
                                    op="pow", hint="use a float exponent (x ** -1.0)")
        return shape, dt

    def half(self, x, npd):
        if npd == kernels.BF16 and (self.c == 3 or self.c == -2):  # as PyTorch: x*x*x, 1/(x*x)
            w = kernels.widen
            sq = w(kernels.narrow(w(x) * w(x), npd))
            with np.errstate(divide="ignore", over="ignore"):
                out = sq * w(x) if self.c == 3 else np.float32(1) / sq
            return kernels.narrow(out, npd)
        return ScalarOp.half(self, x, npd)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        c = self.c
        if c == 0:
            return (g * 0.0,)
        if c == 2:
            return (g * x * 2.0,)
        return (g * (x ** (c - 1)) * c,)


class RPowScalar(_FloatScalar):
    name = "rpow"
    fn = _quiet(lambda x, c: np.power(c, x))

    def out_dtype(self, dt):
        return dt

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        c = self.c
        if c > 0:
            return (g * out * math.log(c),)
        from .compare import where, zeros_scalar_like

        # PyTorch: log of a negative base is NaN; a zero base gives 0 where x >= 0
        log_c = float("-inf") if c == 0 else float("nan")
        grad = g * out * log_c
        if c == 0:
            grad = where(out <= 1.0, zeros_scalar_like(g), grad)  # 0 ** x <= 1 iff x >= 0
        return (grad,)


class _IntDivScalar(ScalarOp):
    """// and % with a number: integer division by zero raises, as in PyTorch."""

    def infer(self, x):
        shape, dt = ScalarOp.infer(self, x)
        if dt.category < 2:
            if dt.category == 0:
                from ...errors import DTypeNotImplementedError

                raise DTypeNotImplementedError(f"{self.name}: not implemented for bool",
                                               op=self.name)
            if not self.reverse and self.c == 0:
                from ...errors import IntegerDivisionError

                raise IntegerDivisionError(f"{self.name}: integer division by zero",
                                           op=self.name)
        return shape, dt

    def forward(self, x):
        if self.reverse:
            from .binary import _int_zero_check

            _int_zero_check(self.name, x)
        return ScalarOp.forward(self, x)


class FloorDivScalar(_IntDivScalar):
    name = "floor_divide"
    differentiable = False
    reverse = False
    fn = _quiet(np.floor_divide)


class RFloorDivScalar(_IntDivScalar):
    name = "floor_divide"
    differentiable = False
    reverse = True
    fn = _quiet(lambda x, c: np.floor_divide(c, x))


class RemainderScalar(_IntDivScalar):
    name = "remainder"
    reverse = False
    fn = _quiet(np.remainder)

    def backward(self, g):
        return (g,)


class RRemainderScalar(_IntDivScalar):
    name = "remainder"
    differentiable = False
    reverse = True
    fn = _quiet(lambda x, c: np.remainder(c, x))

