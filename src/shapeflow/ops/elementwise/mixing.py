"""Elementwise ops of two or three operands: lerp, hypot, atan2, logaddexp(2), fmod, addcmul,
addcdiv, and clamp with tensor bounds."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...dtypes import promote_types
from ...errors import DTypeError
from ...shape import broadcast_shapes
from ...tensor import Tensor, describe
from ..base import OUT, X0, X1, X2, Op, apply
from ..inplace import inplace_method as _inplace
from ..registry import public
from ._common import _as_operand
from .binary import FloatBinary, RealFloatBinary
from .bounds import Clamp
from .bounds import clamp as _clamp_numbers
from .compare import logical_and, logical_or, where
from .integer import fmod  # the one fmod: C's remainder, integer zero checks, gradients
from .unary import exp

_KEEP_ALL = (X0, X1, OUT)
_KEEP_X0_X1 = (X0, X1)


class Hypot(RealFloatBinary):
    name = "hypot"
    ufunc = "hypot"

    def saved(self, a, b, out):
        return _KEEP_ALL

    def backward(self, g):
        a, b, out = self.saved_tensors
        scale = g / out
        return scale * a, scale * b


class Atan2(RealFloatBinary):
    name = "atan2"
    ufunc = "arctan2"

    def saved(self, a, b, out):
        return _KEEP_X0_X1

    def backward(self, g):
        a, b = self.saved_tensors
        scale = g / (a * a + b * b)
        return scale * b, -scale * a


class LogAddExp(FloatBinary):
    """log(exp(a) + exp(b)); for complex operands (NumPy's ufunc has none) the one with the
    larger real part is factored out: mx + log1p(exp(mn - mx)), as PyTorch does."""

    name = "logaddexp"
    ufunc = "logaddexp"
    base = 1.0  # gradients are exp((x - out) * log(base)), base e

    def infer(self, a, b):
        shape, dt = FloatBinary.infer(self, a, b)
        if dt.is_complex:  # an instance attribute: the float path keeps the ufunc
            self.fn = self._complex_fn
        return shape, dt

    def _complex_fn(self, a, b):
        xp = self.device.xp
        first = a.real >= b.real
        mx, mn = xp.where(first, a, b), xp.where(first, b, a)
        with xp.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return mx + xp.log1p(xp.exp(mn - mx))

    def saved(self, a, b, out):
        return _KEEP_ALL

    def backward(self, g):
        a, b, out = self.saved_tensors
        s = self.base
        da, db = exp((a - out) * s), exp((b - out) * s)
        if da.dtype.is_complex:  # holomorphic: g times the conjugate derivative
            da, db = da.conj(), db.conj()
        return g * da, g * db


class LogAddExp2(LogAddExp):
    name = "logaddexp2"
    ufunc = "logaddexp2"
    base = math.log(2.0)
    infer = RealFloatBinary.infer  # PyTorch has no complex logaddexp2


class Lerp(Op):
    """start + weight * (end - start), computed as PyTorch does for |weight| >= 0.5
    (from end) so that weight 1 gives end exactly."""

    name = "lerp"

    def infer(self, start, end, weight):
        shape = broadcast_shapes(start.shape, end.shape, "lerp", ("input", "end"))
        shape = broadcast_shapes(shape, weight.shape, "lerp", ("input", "weight"))
        dt = promote_types(start.dtype, end.dtype)
        if not (dt.is_floating_point or dt.is_complex):
            raise DTypeError(f"lerp: expected floating point tensors, got {dt}", op="lerp",
                             operands=[("input", describe(start)), ("end", describe(end))])
        self.dt = dt
        return shape, dt

    def saved(self, start, end, weight, out):
        keep = []
        if start.requires_grad or end.requires_grad:
            keep.append(X2)
        if weight.requires_grad:
            keep += [X0, X1]
        return tuple(keep)

    def forward(self, start, end, weight):
        npd = self.dt.np
        s, e = start.astype(npd, copy=False), end.astype(npd, copy=False)
        w = weight.astype(npd, copy=False)
        d = e - s
        xp = self.device.xp
        return xp.where(xp.abs(w) < 0.5, s + w * d, e - d * (1.0 - w)).astype(npd, copy=False)

    def backward(self, g):
        saved = list(self.saved_tensors)
        gs = ge = gw = None
        # holomorphic in each operand: complex ones take g times the conjugate derivative
        if self.needs_grad(0) or self.needs_grad(1):
            w = saved.pop(0)
            w = w.conj() if w.dtype.is_complex else w
            gs = g * (1.0 - w) if self.needs_grad(0) else None
            ge = g * w if self.needs_grad(1) else None
        if self.needs_grad(2):
            s, e = saved
            d = e - s
            gw = g * (d.conj() if d.dtype.is_complex else d)
        return gs, ge, gw


class ClampTensor(Op):
    """min(max(x, lo), hi) with tensor bounds (either may be absent): PyTorch's gradients
    (x where lo <= x <= hi, lo where x < lo < hi, hi where x > hi or hi < lo)."""

    name = "clamp"

    def __init__(self, has_lo: bool, has_hi: bool) -> None:
        self.has_lo, self.has_hi = has_lo, has_hi

    def infer(self, x, *bounds):
        shape, dt = x.shape, x.dtype
        for name, b in zip(self._names(), bounds):
            shape = broadcast_shapes(shape, b.shape, "clamp", ("input", name))
            dt = promote_types(dt, b.dtype)
        if dt.is_complex:  # PyTorch has no order of complex numbers
            from .complex_parts import refuse_complex

            refuse_complex(self.name, x, *bounds)
        self.dt = dt
        return shape, dt

    def _names(self):
        return [n for n, has in (("min", self.has_lo), ("max", self.has_hi)) if has]

    def saved(self, x, *bounds, out):
        return _KEEP_X0_X1 if len(bounds) == 1 else (X0, X1, X2)

    def forward(self, x, *bounds):
        npd = self.dt.np
        xp = self.device.xp
        out = x.astype(npd, copy=False)
        bounds = list(bounds)
        if self.has_lo:
            out = xp.maximum(out, bounds.pop(0).astype(npd, copy=False))
        if self.has_hi:
            out = xp.minimum(out, bounds.pop(0).astype(npd, copy=False))
        return out

    def backward(self, g):
        x, *bounds = self.saved_tensors
        lo = bounds.pop(0) if self.has_lo else None
        hi = bounds.pop(0) if self.has_hi else None
        grads = []
        inside = None
        if lo is not None:
            inside = x >= lo
        if hi is not None:
            upper = x <= hi
            inside = upper if inside is None else logical_and(inside, upper)
        grads.append(where(inside, g, 0.0))
        if lo is not None:
            below = x < lo
            if hi is not None:
                below = logical_and(below, lo < hi)
            grads.append(where(below, g, 0.0))
        if hi is not None:
            above = x > hi
            if lo is not None:
                above = logical_or(above, hi < lo)
            grads.append(where(above, g, 0.0))
        return tuple(grads)


@public(method=True)
def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    """x limited to [min, max]; the bounds are numbers or tensors (broadcast)."""
    if not isinstance(min, Tensor) and not isinstance(max, Tensor):
        if min is None and max is None:
            return _clamp_numbers(x, min, max)  # raises, saying so
        return apply(Clamp(min, max), x)
    bounds = [b if isinstance(b, Tensor) else _as_operand(b, x)
              for b in (min, max) if b is not None]
    return apply(ClampTensor(min is not None, max is not None), x, *bounds)


clip = public(sf="clip", method="clip")(clamp)


@public(method=True)
def clamp_min(x: Tensor, min) -> Tensor:  # noqa: A002
    """x limited below by min."""
    return clamp(x, min=min)


@public(method=True)
def clamp_max(x: Tensor, max) -> Tensor:  # noqa: A002
    """x limited above by max."""
    return clamp(x, max=max)


def _pair(op_class, a, b) -> Tensor:
    a = a if isinstance(a, Tensor) else _as_operand(a, b)
    b = b if isinstance(b, Tensor) else _as_operand(b, a)
    return apply(op_class(), a, b)


@public(method=True)
def hypot(a: Tensor, b: Tensor) -> Tensor:
    """sqrt(a^2 + b^2) without overflow."""
    return _pair(Hypot, a, b)


@public(method=True)
def atan2(a: Tensor, b: Tensor) -> Tensor:
    """The angle of the point (b, a): arctan(a / b) in the right quadrant."""
    return _pair(Atan2, a, b)


arctan2 = public(sf="arctan2", method="arctan2")(atan2)


@public(method=True)
def logaddexp(a: Tensor, b: Tensor) -> Tensor:
    """log(exp(a) + exp(b)) without overflow."""
    return _pair(LogAddExp, a, b)


@public(method=True)
def logaddexp2(a: Tensor, b: Tensor) -> Tensor:
    """log2(2^a + 2^b) without overflow."""
    return _pair(LogAddExp2, a, b)


@public(method=True)
def lerp(start: Tensor, end: Tensor, weight) -> Tensor:
    """start + weight * (end - start); weight a number or a tensor (broadcast)."""
    if not isinstance(weight, Tensor):  # a number keeps its precision (float64's 0.4)
        dt = start.dtype if start.dtype.is_floating_point else _dt.to_real(start.dtype) \
            if start.dtype.is_complex else _dt.get_default_dtype()
        weight = Tensor._make(start.device.asarray(float(weight), dt.np), (), dt, start.device)
    end = end if isinstance(end, Tensor) else _as_operand(end, start)
    return apply(Lerp(), start, end, weight)


@public(method=True)
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 * tensor2."""
    prod = tensor1 * tensor2
    return input + (prod * value if value != 1 else prod)


@public(method=True)
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, value=1) -> Tensor:  # noqa: A002
    """input + value * tensor1 / tensor2 (floating point tensors only, as in PyTorch)."""
    for name, t in (("tensor1", tensor1), ("tensor2", tensor2)):
        if isinstance(t, Tensor) and not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise DTypeError(
                "addcdiv: integer division is not supported", op="addcdiv",
                operands=[(name, describe(t))],
                hint="write (input + value * (tensor1 / tensor2)).to(input.dtype)")
    quot = tensor1 / tensor2
    return input + (quot * value if value != 1 else quot)


lerp_ = public(sf=False, method=True)(_inplace("lerp_", lerp))
hypot_ = public(sf=False, method=True)(_inplace("hypot_", hypot))
atan2_ = public(sf=False, method=True)(_inplace("atan2_", atan2))
arctan2_ = public(sf=False, method=True)(_inplace("arctan2_", atan2))
fmod_ = public(sf=False, method=True)(_inplace("fmod_", fmod))
addcmul_ = public(sf=False, method=True)(_inplace("addcmul_", addcmul))
addcdiv_ = public(sf=False, method=True)(_inplace("addcdiv_", addcdiv))
clamp_ = public()(_inplace("clamp_", clamp))  # sf.clamp_; t.clamp_() is _methods.py's
clip_ = public(method=True)(_inplace("clip_", clamp))
clamp_min_ = public(method=True)(_inplace("clamp_min_", clamp_min))
clamp_max_ = public(method=True)(_inplace("clamp_max_", clamp_max))
