"""A tensor with a Python number (`x + 2`, `2 ** x`): no broadcasting, scalar promotion."""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from ...dtypes import DType, promote_types, result_type
from ...errors import DTypeError
from ...tensor import describe
from ..base import OUT, X0, Op


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
        if x.dtype != npd:
            x = x.astype(npd)
        return self.fn(x, self.c)


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

    def backward(self, g):
        return (-g,)


class MulScalar(ScalarOp):
    name = "mul"
    fn = staticmethod(np.multiply)

    def backward(self, g):
        return (g * self.c,)


class _FloatScalar(ScalarOp):
    def out_dtype(self, dt):
        return dt if dt.is_floating_point else _dt.default_float


class DivScalar(_FloatScalar):
    name = "div"
    fn = _quiet(np.true_divide)

    def backward(self, g):
        return (g / self.c,)


class RDivScalar(_FloatScalar):
    name = "rdiv"
    fn = _quiet(lambda x, c: np.true_divide(c, x))

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * (-self.c) / (x * x),)


class PowScalar(ScalarOp):
    name = "pow"
    fn = _quiet(np.power)

    def infer(self, x):
        out = ScalarOp.infer(self, x)
        if self.dt.category < 2 and type(self.c) is int and self.c < 0:  # NumPy's ValueError
            raise DTypeError(
                f"pow: an integer tensor to a negative integer power ({self.c}) is not "
                f"allowed", op="pow", operands=[("input", describe(x))],
                hint=f"use x.float() ** {self.c}, or a float exponent {float(self.c)}")
        return out

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
        return (g * out * math.log(self.c),)


class FloorDivScalar(ScalarOp):
    name = "floor_divide"
    differentiable = False
    fn = _quiet(np.floor_divide)


class RFloorDivScalar(ScalarOp):
    name = "floor_divide"
    differentiable = False
    fn = _quiet(lambda x, c: np.floor_divide(c, x))


class RemainderScalar(ScalarOp):
    name = "remainder"
    fn = _quiet(np.remainder)

    def backward(self, g):
        return (g,)


class RRemainderScalar(ScalarOp):
    name = "remainder"
    differentiable = False
    fn = _quiet(lambda x, c: np.remainder(c, x))

