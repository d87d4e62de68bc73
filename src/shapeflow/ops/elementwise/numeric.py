"""NumPy-style numeric helpers: fmax, fmin (NaN-ignoring), float_power, deg2rad, rad2deg,
sgn, positive; and the predicates isin, isneginf, isposinf, signbit.

The differentiable ones are where, pow, mul and casts underneath (their gradients for free);
the predicates give bool tensors and no gradient.
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...device import meta
from ...errors import DTypeError
from ...tensor import Tensor, describe
from ..base import apply
from ..registry import public
from ._common import _as_operand
from .binary import mul, pow
from .casts import cast
from .compare import UnaryPredicate, ge, gt, isinf, isnan, le, logical_and, logical_or, lt, where
from .complex_parts import refuse_complex
from .unary import sign


class SignBit(UnaryPredicate):
    """Whether the sign bit is set: real numbers only (PyTorch has none for complex)."""

    name = ufunc = "signbit"

    def infer(self, x):
        if x.dtype.is_complex:
            refuse_complex(self.name, x, hint="take signbit(real(x)) or signbit(imag(x))")
        return x.shape, _dt.bool_


def _tensors(a, b, op: str) -> tuple[Tensor, Tensor]:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise DTypeError(f"{op}: expected at least one tensor, got {type(a).__name__} and "
                         f"{type(b).__name__}", op=op)
    a = _as_operand(a, b if isinstance(b, Tensor) else None)
    return a, _as_operand(b, a)


def _nan_pick(a, b, op: str, keep_a) -> Tensor:
    a, b = _tensors(a, b, op)
    dt = _dt.promote_types(a.dtype, b.dtype)
    a, b = (t if t.dtype is dt else cast(t, dt) for t in (a, b))
    # PyTorch's gradient: all of it to a where a wins, ties included, or b is NaN
    return where(logical_or(keep_a(a, b), isnan(b)), a, b)


@public(method=True)
def fmax(a: Tensor, b: Tensor) -> Tensor:
    """The larger of a and b, elementwise; a NaN loses to a number (NaN only if both are)."""
    return _nan_pick(a, b, "fmax", ge)


@public(method=True)
def fmin(a: Tensor, b: Tensor) -> Tensor:
    """The smaller of a and b, elementwise; a NaN loses to a number (NaN only if both are)."""
    return _nan_pick(a, b, "fmin", le)


def _is_complex(v) -> bool:
    return v.dtype.is_complex if isinstance(v, Tensor) else isinstance(v, complex)


@public(method=True)
def float_power(a, b) -> Tensor:
    """a ** b computed in double precision (float64 result; complex128 where either operand
    is complex, as PyTorch)."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise DTypeError("float_power: expected at least one tensor", op="float_power")
    wide = _dt.complex128 if _is_complex(a) or _is_complex(b) else _dt.float64
    number = complex if wide is _dt.complex128 else float

    def double(t):
        if not isinstance(t, Tensor):
            return number(t)
        return t if t.dtype is wide else cast(t, wide)

    a, b = double(a), double(b)
    return pow(a, b)


def _to_float(x: Tensor, op: str) -> Tensor:
    if x.dtype.is_complex:  # PyTorch refuses: an angle in degrees is a real number
        refuse_complex(op, x, hint="convert angle(x) instead")
    return x if x.dtype.is_floating_point else cast(x, _dt.get_default_dtype())


@public(method=True)
def deg2rad(x: Tensor) -> Tensor:
    """Degrees to radians, elementwise (integers become the default float dtype)."""
    return mul(_to_float(x, "deg2rad"), math.pi / 180)


@public(method=True)
def rad2deg(x: Tensor) -> Tensor:
    """Radians to degrees, elementwise (integers become the default float dtype)."""
    return mul(_to_float(x, "rad2deg"), 180 / math.pi)


@public(method=True)
def sgn(x: Tensor) -> Tensor:
    """sign(x) (for real tensors: -1, 0 or 1, and 0 for NaN as in PyTorch); z / |z| for
    complex z (0 at 0)."""
    if x.dtype.is_complex:
        from .complex_parts import _complex_sgn

        return _complex_sgn(x)
    return where(isnan(x), 0, sign(x)) if x.dtype.is_floating_point else sign(x)


@public(method=True)
def positive(x: Tensor) -> Tensor:
    """x itself (unary +); an error for bool, as in PyTorch."""
    if x.dtype is _dt.bool_:
        raise DTypeError("positive: not supported for bool tensors", op="positive",
                         operands=[("input", describe(x))], hint="use x itself")
    return x


@public(method=True)
def isneginf(x: Tensor) -> Tensor:
    """Whether each element is -inf (bool)."""
    return logical_and(isinf(x), lt(x, 0))


@public(method=True)
def isposinf(x: Tensor) -> Tensor:
    """Whether each element is +inf (bool)."""
    return logical_and(isinf(x), gt(x, 0))


@public(method=True)
def signbit(x: Tensor) -> Tensor:
    """Whether each element's sign bit is set (true for -0.0 too; bool)."""
    return apply(SignBit(), x)


@public(method=True)
def isin(elements, test_elements, *, assume_unique: bool = False,
         invert: bool = False) -> Tensor:
    """Whether each of elements is among test_elements (bool, elements' shape)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise DTypeError("isin: expected at least one tensor", op="isin")
    like = elements if isinstance(elements, Tensor) else test_elements
    e = _as_operand(elements, like)
    t = _as_operand(test_elements, like)
    refuse_complex("isin", e, t)  # PyTorch has no complex isin (it sorts)
    if e.device is meta or t.device is meta:
        return Tensor._make(None, tuple(e.shape), _dt.bool_, meta)
    xp = e.device.xp
    out = xp.isin(e._data, t._data, assume_unique=assume_unique, invert=invert)
    return Tensor._make(xp.asarray(out), tuple(e.shape), _dt.bool_, e.device)
