"""A complex number's parts: real, imag (views), conj, angle, sgn, isreal, and the complex
dtype checks; on a real tensor each is PyTorch's real-input answer (real and conj give x
itself, angle 0 or pi with a zero gradient, isreal all True, imag an error).

Gradients follow PyTorch's convention for complex inputs: for a real loss L of z = x + iy
the gradient is dL/dx + i dL/dy, so a holomorphic f passes back g * conj(f'(z)).
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...dtypes import COMPLEX_TO_FLOAT, INT_TO_FLOAT, promote
from ...errors import DTypeError, DTypeRuntimeError
from ...tensor import Tensor, describe
from ..base import X0, Op, apply
from ..registry import public
from .casts import cast


def _need_complex(op: str, x: Tensor) -> None:
    if not x.dtype.is_complex:
        raise DTypeRuntimeError(f"{op} is not implemented for tensors with non-complex dtypes",
                                op=op, operands=[("input", describe(x))],
                                hint="make it complex first: x.to(sf.complex64)")


@public()
def is_complex(input: Tensor) -> bool:  # noqa: A002
    """Whether input's dtype is complex (complex64 or complex128)."""
    return input.dtype.is_complex


def _view_apply(op: Op, x: Tensor) -> Tensor:
    from ..movement.views import _view_apply as view_apply  # (movement imports this family)

    return view_apply(op, x)


class _Part(Op):
    """The real or imaginary part of a complex tensor: a view of its floats (writable)."""

    is_view = True  # the output shares the input's memory and version counter

    def infer(self, x):
        return x.shape, _dt.to_real(x.dtype)

    def meta_layout(self, arr):
        return arr  # one element of the layout per complex element, as the view keeps


class Real(_Part):
    name = "real"

    def forward(self, x):
        return x.real

    def backward(self, g):
        return (cast(g, _dt.to_complex(g.dtype)),)


class Imag(_Part):
    name = "imag"

    def forward(self, x):
        return x.imag

    def backward(self, g):
        return (cast(g, _dt.to_complex(g.dtype)) * 1j,)


@public()
def real(input: Tensor) -> Tensor:  # noqa: A002
    """The real part: a view of a complex tensor's real floats; input itself when real."""
    if not input.dtype.is_complex:
        return input
    return _view_apply(Real(), input)


@public()
def imag(input: Tensor) -> Tensor:  # noqa: A002
    """The imaginary part of a complex tensor, as a view of its floats."""
    _need_complex("imag", input)
    return _view_apply(Imag(), input)


class Conj(Op):
    """The complex conjugate, computed into new memory (shapeflow has no lazy conjugation)."""

    name = "conj"

    def infer(self, x):
        return x.shape, x.dtype

    def forward(self, x):
        return self.device.xp.conj(x)

    def backward(self, g):
        return (conj(g),)


@public(method=True)
def conj(input: Tensor) -> Tensor:  # noqa: A002
    """The complex conjugate: input itself for a real tensor."""
    if not input.dtype.is_complex:
        return input
    return apply(Conj(), input)


@public(method=True)
def resolve_conj(input: Tensor) -> Tensor:  # noqa: A002
    """input with a lazy conjugation applied: input itself (shapeflow conjugates nothing lazily)."""
    return input


@public(method=True)
def resolve_neg(input: Tensor) -> Tensor:  # noqa: A002
    """input with a lazy negation applied: input itself (shapeflow negates nothing lazily)."""
    return input


@public()
def is_conj(input: Tensor) -> bool:  # noqa: A002
    """Whether input is a lazily conjugated view: never in shapeflow (conj computes)."""
    return False


@public(method=True)
def conj_physical(input: Tensor) -> Tensor:  # noqa: A002
    """The conjugate as a new tensor: a copy of a real tensor (differentiable)."""
    if not input.dtype.is_complex:
        return input.clone()
    return apply(Conj(), input)


@public(method=True)
def isreal(input: Tensor) -> Tensor:  # noqa: A002
    """Whether each element is real (imaginary part 0): all True for a real tensor."""
    if input.dtype.is_complex:
        return imag(input.detach()) == 0
    from ...factories import ones

    return ones(tuple(input.shape), dtype=_dt.bool_, device=input.device)


class Angle(Op):
    """The argument: atan2(imag, real) of a complex number (gradient i z / |z|^2, 0 at 0);
    of a real number pi below 0, else 0, NaN staying NaN, with a zero gradient."""

    name = "angle"
    promotion = INT_TO_FLOAT

    def infer(self, x):
        self.complex = x.dtype.is_complex
        self.dt = promote(COMPLEX_TO_FLOAT if self.complex else self.promotion, x)
        return x.shape, self.dt

    def saved(self, x, out):
        return (X0,) if self.complex else ()

    def forward(self, x):
        xp = self.device.xp
        if self.complex:
            return xp.angle(x).astype(self.dt.np, copy=False)
        out = xp.where(x < 0, math.pi, 0.0).astype(self.dt.np)
        if x.dtype.kind == "f":
            out = xp.where(xp.isnan(x), x, out).astype(self.dt.np)
        return out

    def backward(self, g):
        if not self.complex:
            return (g * 0.0,)  # angle is constant on either side of 0 (PyTorch's gradient)
        from .compare import where

        (z,) = self.saved_tensors
        r2 = abs_squared(z)
        return (where(z == 0, 0.0, (z * 1j) * (g / where(r2 == 0, 1.0, r2))),)


def abs_squared(z: Tensor) -> Tensor:
    """|z|^2 as a real tensor (x^2 + y^2), differentiable."""
    re, im = real(z), imag(z)
    return re * re + im * im


@public(method=True)
def angle(input: Tensor) -> Tensor:  # noqa: A002
    """The elementwise argument (angle in radians): atan2(imag, real); 0 or pi when real."""
    if input.dtype is _dt.bool_:
        input = cast(input, _dt.get_default_dtype())
    return apply(Angle(), input)


class Sgn(Op):
    """z / |z| (0 at 0) for complex z."""

    name = "sgn"

    def infer(self, x):
        return x.shape, x.dtype

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        xp = self.device.xp
        r = xp.abs(x)
        with xp.errstate(invalid="ignore", divide="ignore"):
            return xp.where(r == 0, 0, x / xp.where(r == 0, 1, r)).astype(x.dtype, copy=False)

    def backward(self, g):
        # for s = z / |z|: (g - Re(g conj(s)) s) / |z|, and 0 where z is 0 (PyTorch's)
        from .compare import where
        from .unary import abs as abs_

        (z,) = self.saved_tensors
        r = abs_(z)
        s = _complex_sgn(z)
        along = real(g * s.conj())
        return (where(r == 0, 0.0, (g - along * s) / where(r == 0, 1.0, r)),)


def _complex_sgn(z: Tensor) -> Tensor:
    """z / |z| (0 at 0) of a complex tensor: sf.sgn's complex case (numeric.sgn)."""
    return apply(Sgn(), z)


def refuse_complex(op: str, *tensors: Tensor,
                   hint: str = "compare or round real(x), imag(x) or abs(x) instead") -> None:
    """PyTorch has no `op` for complex tensors (comparisons, rounding, real special
    functions): a DTypeError."""
    for t in tensors:
        if isinstance(t, Tensor) and t.dtype.is_complex:
            raise DTypeError(f"{op} is not supported for complex tensors", op=op,
                             operands=[("input", describe(t))], hint=hint)


def complex_not_yet(op: str, *tensors: Tensor, hint: str | None = None) -> None:
    """PyTorch has `op` for complex tensors, shapeflow not yet: a DTypeError saying so (rather
    than a raw NumPy error or an answer that drops the imaginary part)."""
    for t in tensors:
        if isinstance(t, Tensor) and t.dtype.is_complex:
            raise DTypeError(f"{op}: shapeflow does not support complex tensors here yet",
                             op=op, operands=[("input", describe(t))], hint=hint)


REAL_FUNCTION = "it is a function of real numbers: apply it to real(x), imag(x) or abs(x)"


class Complex(Op):
    """real + i imag from two real tensors of one float dtype (broadcast)."""

    name = "complex"

    def infer(self, re, im):
        from ...shape import broadcast_shapes

        ops = [("real", describe(re)), ("imag", describe(im))]
        if re.dtype is not im.dtype:
            raise DTypeRuntimeError(
                f"complex: expected both inputs to be of the same dtype, got {re.dtype} and "
                f"{im.dtype}", op="complex", operands=ops, hint="cast one with .to()")
        if re.dtype not in (_dt.float32, _dt.float64):
            raise DTypeRuntimeError(
                f"complex: expected float or double inputs, got {re.dtype}", op="complex",
                operands=ops, hint="cast with .float() or .double() first")
        return broadcast_shapes(re.shape, im.shape, "complex"), _dt.to_complex(re.dtype)

    def forward(self, re, im):
        xp = self.device.xp
        out = xp.empty(xp.broadcast_shapes(re.shape, im.shape), _dt.to_complex(
            _dt.from_numpy_dtype(re.dtype)).np)
        out.real, out.imag = re, im
        return out

    def backward(self, g):
        return real(g), imag(g)


@public()
def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A001  (PyTorch's names)
    """The complex tensor real + i imag (float32 gives complex64, float64 complex128)."""
    return apply(Complex(), real, imag)


@public()
def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002  (PyTorch's names)
    """abs * (cos(angle) + i sin(angle)), differentiable in both."""
    from .unary import cos, sin

    if abs.dtype is not angle.dtype or abs.dtype not in (_dt.float32, _dt.float64):
        Complex().infer(abs, angle)  # PyTorch's errors for the dtypes
    return complex(abs * cos(angle), abs * sin(angle))
