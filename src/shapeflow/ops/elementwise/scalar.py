"""A tensor with a Python number (`x + 2`, `2 ** x`): no broadcasting, scalar promotion.

Each op computes with its device's array namespace: `ufunc` names the function, or the op
overrides `fn(x, c)`. `x + c`, `x * c` and `c - x` use the arrays' own Python operators
(every array type has them, and they cost less than a lookup of the namespace).
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...dtypes import DEFAULT, INT_TO_FLOAT, DType, promote, promote_types, result_type
from ..base import OUT, X0, Op

_BOOL_NP = _dt.bool_.np
_F32_NP, _F64_NP, _BF16_NP = _dt.float32.np, _dt.float64.np, _dt.bfloat16.np


class ScalarOp(Op):
    """x (op) c for a Python number c: no broadcasting, PyTorch's scalar promotion."""

    ufunc: str | None = None  # the array-namespace function computing it, by name
    promotion = DEFAULT

    def __init__(self, c) -> None:
        self.c = c

    def infer(self, x):
        self.dt = self.out_dtype(scalar_result_type(x.dtype, self.c))
        return x.shape, self.dt

    def out_dtype(self, dt: DType) -> DType:
        """The result dtype from the promoted dt: DEFAULT's, dt itself."""
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
            return self.fn(x, self.device.xp.asarray(self.c).astype(npd))
        if npd is _BOOL_NP and out.dtype != npd:  # bool ** True stays bool in PyTorch
            out = out.astype(npd)
        return out

    def fn(self, x, c):
        """x (op) c on x of the result dtype: the namespace's function `ufunc`."""
        return getattr(self.device.xp, self.ufunc)(x, c)

    # PyTorch's CPU kernels for 16-bit floats: mul and div take the number in float32,
    # the others round it to the tensor's dtype first; all compute in float32, round once
    opmath_scalar = False

    def half(self, x, npd):
        """fn on a bfloat16/float16 array, in float32, with PyTorch's scalar handling."""
        xp, k = self.device.xp, self.device.kernels
        c = self.c if self.opmath_scalar or type(self.c) is bool else \
            float(xp.asarray(self.c, xp.float64).astype(npd))
        with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return k.cast(xp.asarray(self.fn(k.cast(x, _F32_NP), c)), npd)


def scalar_result_type(dt: DType, c) -> DType:
    """A tensor of dtype dt with a Python number: the number widens only across categories."""
    tc = type(c)
    if tc is float:  # (a complex tensor stays complex)
        return dt if dt.is_floating_point or dt.is_complex else _dt.default_float
    if tc is int:
        return _dt.default_int if dt.is_bool else dt
    if tc is bool:
        return dt
    return promote_types(dt, result_type(c))


class _Quiet(ScalarOp):
    """Division and overflow give inf/nan quietly, as in PyTorch."""

    def fn(self, x, c):
        xp = self.device.xp
        with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return self.quiet(xp, x, c)

    def quiet(self, xp, x, c):
        return getattr(xp, self.ufunc)(x, c)


def _number_first(self, xp, x, c):
    """c (op) x: the `quiet` of the reversed ops (rdiv, rpow, ...)."""
    return getattr(xp, self.ufunc)(c, x)


class AddScalar(ScalarOp):
    name = "add"
    ufunc = "add"

    def forward(self, x):
        npd = self.dt.np
        if x.dtype is npd and (npd is _F32_NP or npd is _F64_NP):
            return x + self.c  # the array's own operator: nothing to cast or round
        return ScalarOp.forward(self, x)

    def backward(self, g):
        return (g,)


class RSubScalar(ScalarOp):
    name = "rsub"
    ufunc = "subtract"

    def fn(self, x, c):
        return c - x

    def infer(self, x):
        if x.dtype is _dt.bool_ or type(self.c) is bool:
            from .binary import _bool_subtraction

            raise _bool_subtraction()
        return ScalarOp.infer(self, x)

    def backward(self, g):
        return (-g,)


class MulScalar(ScalarOp):
    name = "mul"
    ufunc = "multiply"
    opmath_scalar = True

    def forward(self, x):
        npd = self.dt.np
        if x.dtype is npd and (npd is _F32_NP or npd is _F64_NP):
            return x * self.c
        return ScalarOp.forward(self, x)

    def backward(self, g):
        c = self.c
        return (g * (c if type(c) is not complex else c.conjugate()),)


class _FloatScalar(_Quiet):
    promotion = INT_TO_FLOAT

    def out_dtype(self, dt):
        # floats are kept: promote() (a call) only for the rest
        return dt if dt.is_floating_point else promote(self.promotion, dt)


class DivScalar(_FloatScalar):
    name = "div"
    ufunc = "true_divide"
    opmath_scalar = True

    def backward(self, g):
        c = self.c
        return (g / (c if type(c) is not complex else c.conjugate()),)


class RDivScalar(_FloatScalar):
    name = "rdiv"
    ufunc = "true_divide"
    quiet = _number_first

    def half(self, x, npd):
        # PyTorch's c / x is x.reciprocal() * c: two roundings for 16-bit floats
        xp, k = self.device.xp, self.device.kernels
        with xp.errstate(divide="ignore"):
            r = k.cast(xp.asarray(xp.reciprocal(k.cast(x, _F32_NP))), npd)
        return k.cast(xp.asarray(k.cast(r, _F32_NP) * xp.float32(self.c)), npd)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        if x.dtype.is_complex or type(self.c) is complex:  # g times the conjugate derivative
            return (g * (-self.c / (x * x)).conj(),)
        return (g * (-self.c) / (x * x),)


class PowScalar(_Quiet):
    name = "pow"
    ufunc = "power"

    def infer(self, x):
        shape, dt = ScalarOp.infer(self, x)
        if not dt.is_floating_point and type(self.c) is int and self.c < 0:
            from ...errors import DTypeRuntimeError

            raise DTypeRuntimeError("Integers to negative integer powers are not allowed.",
                                    op="pow", hint="use a float exponent (x ** -1.0)")
        return shape, dt

    def half(self, x, npd):
        if npd == _BF16_NP and (self.c == 3 or self.c == -2):  # as PyTorch: x*x*x, 1/(x*x)
            xp, k = self.device.xp, self.device.kernels
            x32 = k.cast(x, _F32_NP)
            sq = k.cast(k.cast(x32 * x32, npd), _F32_NP)
            with xp.errstate(divide="ignore", over="ignore"):
                out = sq * x32 if self.c == 3 else xp.float32(1) / sq
            return k.cast(out, npd)
        return ScalarOp.half(self, x, npd)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        c = self.c
        if x.dtype.is_complex or type(c) is complex:  # g times the conjugate derivative
            return (g * 0.0,) if c == 0 else (g * ((x ** (c - 1)) * c).conj(),)
        if c == 0:
            return (g * 0.0,)
        if c == 2:
            return (g * x * 2.0,)
        return (g * (x ** (c - 1)) * c,)


class RPowScalar(_Quiet):
    name = "rpow"
    ufunc = "power"
    quiet = _number_first

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        c = self.c
        if out.dtype.is_complex:  # d(c**x)/dx = c**x log c (principal log), conjugated
            import cmath

            return (g * (out * cmath.log(c) if c != 0 else out * float("-inf")).conj(),)
        if c > 0:
            return (g * out * math.log(c),)
        from .compare import where, zeros_scalar_like

        # PyTorch: log of a negative base is NaN; a zero base gives 0 where x >= 0
        log_c = float("-inf") if c == 0 else float("nan")
        grad = g * out * log_c
        if c == 0:
            grad = where(out <= 1.0, zeros_scalar_like(g), grad)  # 0 ** x <= 1 iff x >= 0
        return (grad,)


class _IntDivScalar(_Quiet):
    """// and % with a number: integer division by zero raises, as in PyTorch."""

    def infer(self, x):
        shape, dt = ScalarOp.infer(self, x)
        if not dt.is_floating_point:
            if dt.is_bool:
                from ...errors import DTypeNotImplementedError

                raise DTypeNotImplementedError(f"{self.name}: not implemented for bool",
                                               op=self.name)
            if dt.is_complex:  # PyTorch has no floor division of complex numbers
                from .complex_parts import refuse_complex

                refuse_complex(self.name, x)
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
    ufunc = "floor_divide"


class RFloorDivScalar(_IntDivScalar):
    name = "floor_divide"
    differentiable = False
    reverse = True
    ufunc = "floor_divide"
    quiet = _number_first


class RemainderScalar(_IntDivScalar):
    name = "remainder"
    reverse = False
    ufunc = "remainder"

    def backward(self, g):
        return (g,)


class RRemainderScalar(_IntDivScalar):
    name = "remainder"
    differentiable = False
    reverse = True
    ufunc = "remainder"
    quiet = _number_first

