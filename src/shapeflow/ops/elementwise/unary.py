"""Unary math (exp, log, sqrt, sin, ...) and rounding: one tensor in, same shape out.

Each op computes with its device's array namespace: `ufunc` names the function ('exp'), or
the op overrides `fn(x)`.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...dtypes import COMPLEX_TO_FLOAT, DEFAULT, INT_TO_FLOAT, promote
from ...errors import DTypeError
from ...tensor import Tensor, describe
from ..base import OUT, OUT_ACT, X0, Op, apply
from ..registry import public
from ._common import refuse_dtype
from .scalar import PowScalar, RDivScalar

_F32_NP = _dt.float32.np


class Unary(Op):
    """A float-valued unary op: the output has the input's shape and (float) dtype."""

    ufunc: str | None = None  # the array-namespace function computing it, by name
    promotion = INT_TO_FLOAT  # torch.exp(int tensor) is float32

    def infer(self, x):
        dt = x.dtype
        # every kind but ALWAYS_BOOL keeps a float: promote() (a call) only for the others
        return x.shape, dt if dt.is_floating_point else promote(self.promotion, dt)

    def forward(self, x):
        dt = x.dtype
        if dt.kind != "f" or dt.itemsize == 2:
            if dt.kind != "f" and dt.kind != "c" and dt.name != "bfloat16":
                x = x.astype(_dt.default_float.np)
                dt = x.dtype
            if dt.itemsize == 2:  # bfloat16/float16: every step in float32, rounded once
                k = self.device.kernels
                return k.cast(self.device.xp.asarray(self.fn(k.cast(x, _F32_NP))), dt)
        return self.fn(x)

    def fn(self, x):
        """The op on a float32/float64 array: the namespace's function `ufunc`."""
        return getattr(self.device.xp, self.ufunc)(x)


class Neg(Op):
    name = "neg"
    promotion = DEFAULT

    def infer(self, x):
        if x.dtype is _dt.bool_:
            raise DTypeError("neg: negation of a bool tensor is not defined", op="neg",
                             operands=[("x", describe(x))], hint="use logical_not()")
        return x.shape, x.dtype

    def forward(self, x):
        return -x  # the array's own operator

    def backward(self, g):
        return (-g,)


class Abs(Op):
    name = "abs"
    promotion = COMPLEX_TO_FLOAT

    def infer(self, x):
        dt = x.dtype
        if dt is _dt.bool_:
            refuse_dtype(self.name, x)
        return x.shape, dt if not dt.is_complex else promote(self.promotion, dt)

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        return self.device.xp.abs(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        if x.dtype.is_complex:  # g z / |z| (0 at 0): PyTorch's sgn
            from .complex_parts import _complex_sgn

            return (g * _complex_sgn(x),)
        return (g * sign(x),)


class Sign(Op):
    name = "sign"
    promotion = DEFAULT

    def infer(self, x):
        if x.dtype.is_complex:  # PyTorch's: sign is for real numbers, sgn for complex
            from .complex_parts import refuse_complex

            refuse_complex("sign (use sgn for complex)", x)
        return x.shape, x.dtype

    def forward(self, x):
        if x.dtype.kind == "b":
            return x.copy()
        xp = self.device.xp
        out = xp.sign(x)
        if out.dtype.kind == "f":  # PyTorch: sign(nan) is 0
            out = xp.where(xp.isnan(out), out.dtype.type(0), out)
        return out

    def backward(self, g):
        from ...factories import zeros_like

        return (zeros_like(g),)


class Exp(Unary):
    name = "exp"
    ufunc = "exp"

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * (out if not out.dtype.is_complex else out.conj()),)


class Log(Unary):
    name = "log"
    ufunc = "log"

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        with self.device.xp.errstate(divide="ignore", invalid="ignore"):
            return Unary.forward(self, x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g / (x if not x.dtype.is_complex else x.conj()),)


class Log1p(Log):
    name = "log1p"
    ufunc = "log1p"

    def backward(self, g):
        (x,) = self.saved_tensors
        d = x + 1.0
        return (g / (d if not d.dtype.is_complex else d.conj()),)


class Expm1(Unary):
    name = "expm1"
    ufunc = "expm1"

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        d = out + 1.0
        return (g * (d if not d.dtype.is_complex else d.conj()),)


class Sqrt(Unary):
    name = "sqrt"
    ufunc = "sqrt"

    def saved(self, x, out):
        return (OUT,)

    def forward(self, x):
        with self.device.xp.errstate(invalid="ignore"):
            return Unary.forward(self, x)

    def backward(self, g):
        (out,) = self.saved_tensors
        d = out * 2.0
        return (g / (d if not d.dtype.is_complex else d.conj()),)


class Rsqrt(Unary):
    name = "rsqrt"

    def saved(self, x, out):
        return (OUT,)

    def fn(self, x):
        xp = self.device.xp
        with xp.errstate(divide="ignore", invalid="ignore"):
            return xp.reciprocal(xp.sqrt(x))

    def backward(self, g):
        (out,) = self.saved_tensors
        d = out * out * out
        return (g * (d if not d.dtype.is_complex else d.conj()) * -0.5,)


class Sin(Unary):
    name = "sin"
    ufunc = "sin"

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        d = cos(x)
        return (g * (d if not d.dtype.is_complex else d.conj()),)


class Cos(Unary):
    name = "cos"
    ufunc = "cos"

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        d = sin(x)
        return (-g * (d if not d.dtype.is_complex else d.conj()),)


class Tanh(Unary):
    name = "tanh"
    ufunc = "tanh"

    def saved(self, x, out):
        return (OUT_ACT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        d = 1.0 - out * out
        return (g * (d if not d.dtype.is_complex else d.conj()),)


@public(method=True)
def neg(x: Tensor) -> Tensor:
    return apply(Neg(), x)


negative = public(sf="negative", method="negative")(neg)


@public(method=True)
def abs(x: Tensor) -> Tensor:  # noqa: A001
    return apply(Abs(), x)


@public(method=True)
def sign(x: Tensor) -> Tensor:
    return apply(Sign(), x)


@public(method=True)
def exp(x: Tensor) -> Tensor:
    return apply(Exp(), x)


@public(method=True)
def log(x: Tensor) -> Tensor:
    return apply(Log(), x)


@public(method=True)
def log1p(x: Tensor) -> Tensor:
    return apply(Log1p(), x)


@public(method=True)
def expm1(x: Tensor) -> Tensor:
    return apply(Expm1(), x)


@public(method=True)
def sqrt(x: Tensor) -> Tensor:
    return apply(Sqrt(), x)


@public(method=True)
def rsqrt(x: Tensor) -> Tensor:
    return apply(Rsqrt(), x)


@public(method=True)
def sin(x: Tensor) -> Tensor:
    return apply(Sin(), x)


@public(method=True)
def cos(x: Tensor) -> Tensor:
    return apply(Cos(), x)


@public(method=True, functional=True)
def tanh(x: Tensor) -> Tensor:
    return apply(Tanh(), x)


@public(method=True)
def square(x: Tensor) -> Tensor:
    return apply(PowScalar(2), x)


@public(method=True)
def reciprocal(x: Tensor) -> Tensor:
    return apply(RDivScalar(1.0), x)


class _Rounding(Op):
    differentiable = True
    promotion = DEFAULT

    def infer(self, x):
        dt = x.dtype
        if dt is _dt.bool_:
            refuse_dtype(self.name, x)
        if dt.is_complex:
            from .complex_parts import refuse_complex

            refuse_complex(self.name, x)
        return x.shape, dt

    def forward(self, x):
        return getattr(self.device.xp, self.ufunc)(x)

    def backward(self, g):
        return (g * 0.0,)


Floor = type("Floor", (_Rounding,), {"name": "floor", "ufunc": "floor"})
Ceil = type("Ceil", (_Rounding,), {"name": "ceil", "ufunc": "ceil"})
Round = type("Round", (_Rounding,), {"name": "round", "ufunc": "round"})
Trunc = type("Trunc", (_Rounding,), {"name": "trunc", "ufunc": "trunc"})


@public(method=True)
def floor(x: Tensor) -> Tensor:
    return apply(Floor(), x)


@public(method=True)
def ceil(x: Tensor) -> Tensor:
    return apply(Ceil(), x)


@public(method=True)
def round(x: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001
    """x rounded half to even, to `decimals` decimal places (negative: left of the point)."""
    if decimals == 0:
        return apply(Round(), x)
    if not x.dtype.is_floating_point:  # PyTorch: no round kernel with decimals for ints
        refuse_dtype("round", x)
    # PyTorch's kernel: scale by 10**|decimals| in the input's dtype, round, scale back
    scale = 10.0 ** (decimals if decimals > 0 else -decimals)  # abs() here is the op
    if decimals > 0:
        return apply(Round(), x * scale) / scale
    return apply(Round(), x / scale) * scale


@public(method=True)
def trunc(x: Tensor) -> Tensor:
    return apply(Trunc(), x)

