"""Special functions: erf, erfc, erfinv, lgamma, digamma, logit, xlogy, sinc, nan_to_num.

The kernels compute in float64 (`special_kernels.py`) on the op's device's array namespace and
round once to the output dtype.
"""

from __future__ import annotations

import math
import sys

from ...tensor import Tensor
from ..base import OUT, X0, X1, Op, apply
from ..inplace import inplace_method as _inplace
from ..registry import public
from . import special_kernels as K
from ._common import _NUMBER, _as_operand
from .binary import RealFloatBinary
from .compare import isfinite, where
from .complex_parts import REAL_FUNCTION, refuse_complex
from .unary import Unary, cos, exp, sin

_SQRT_PI = math.sqrt(math.pi)
# each float dtype's largest finite value (nan_to_num's default for +-inf)
_LARGEST = {"float64": sys.float_info.max, "float32": float.fromhex("0x1.fffffep127"),
            "float16": 65504.0, "bfloat16": float.fromhex("0x1.fep127")}


class Special(Unary):
    """A float unary op whose kernel `fn(x, xp)` takes and returns float64 arrays of the
    namespace xp."""

    def infer(self, x):
        shape, dt = Unary.infer(self, x)
        if dt.is_complex:  # real functions (PyTorch has no complex erf, lgamma, bessel...)
            refuse_complex(self.name, x, hint=REAL_FUNCTION)
        self.out_np = dt.np
        return shape, dt

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        xp = self.device.xp
        return self.fn(x.astype(xp.float64), xp).astype(self.out_np, copy=False)


class Erf(Special):
    name = "erf"
    fn = staticmethod(K.erf)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * exp(-(x * x)) * (2.0 / _SQRT_PI),)


class Erfc(Special):
    name = "erfc"
    fn = staticmethod(K.erfc)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * exp(-(x * x)) * (-2.0 / _SQRT_PI),)


class Erfinv(Special):
    name = "erfinv"
    fn = staticmethod(K.erfinv)

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * exp(out * out) * (_SQRT_PI / 2.0),)


class Lgamma(Special):
    name = "lgamma"
    fn = staticmethod(K.lgamma)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * digamma(x),)


class Digamma(Special):
    name = "digamma"
    fn = staticmethod(K.digamma)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * apply(Trigamma(), x),)


class Trigamma(Special):
    """psi'(x), digamma's gradient (polygamma(1, x)); it has no gradient of its own here."""

    name = "polygamma"
    differentiable = False
    fn = staticmethod(K.trigamma)


class Sinc(Special):
    """sin(pi x) / (pi x), 1 at 0; complex x too (computed in complex128), as PyTorch."""

    name = "sinc"

    def infer(self, x):
        shape, dt = Unary.infer(self, x)
        self.out_np = dt.np
        return shape, dt

    def forward(self, x):
        xp = self.device.xp
        wide = xp.complex128 if x.dtype.kind == "c" else xp.float64
        with xp.errstate(invalid="ignore"):
            return xp.sinc(x.astype(wide)).astype(self.out_np, copy=False)

    def backward(self, g):
        (x,) = self.saved_tensors
        zero = x == 0
        safe = where(zero, 1.0, x)
        ps = safe * math.pi
        d = where(zero, 0.0, (ps * cos(ps) - sin(ps)) / (ps * safe))
        return (g * (d.conj() if d.dtype.is_complex else d),)  # holomorphic: conj(f'(z))


class Logit(Special):
    """log(x / (1 - x)); with eps, x is first clamped to [eps, 1 - eps] (gradient 0 outside)."""

    name = "logit"

    def __init__(self, eps: float | None) -> None:
        self.eps = eps

    def fn(self, x, xp):
        if self.eps is not None:
            x = xp.clip(x, self.eps, 1.0 - self.eps)
        with xp.errstate(divide="ignore", invalid="ignore"):
            return xp.log(x / (1.0 - x))

    def backward(self, g):
        (x,) = self.saved_tensors
        d = g / (x * (1.0 - x))
        if self.eps is None:  # NaN outside [0, 1], as the value is
            return (where((x < 0) | (x > 1), float("nan"), d),)
        inside = (x >= self.eps) & (x <= 1.0 - self.eps)
        return (where(inside, d, 0.0),)


class NanToNum(Op):
    """NaN, +inf and -inf replaced by numbers (the dtype's extremes by default)."""

    name = "nan_to_num"

    def __init__(self, nan, posinf, neginf) -> None:
        self.nan, self.posinf, self.neginf = nan, posinf, neginf

    def infer(self, x):
        return x.shape, x.dtype

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        if x.dtype.kind == "c":  # the real and imaginary parts each, as PyTorch
            return (self._replace(x.real) + 1j * self._replace(x.imag)).astype(x.dtype)
        return self._replace(x)

    def _replace(self, x):
        big = _LARGEST.get(x.dtype.name)
        if big is None:  # integers and bools: nothing to replace
            return x.copy()
        xp = self.device.xp
        out = xp.where(xp.isnan(x), 0.0 if self.nan is None else self.nan, x)
        out = xp.where(x == xp.inf, big if self.posinf is None else self.posinf, out)
        out = xp.where(x == -xp.inf, -big if self.neginf is None else self.neginf, out)
        return out.astype(x.dtype, copy=False)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * isfinite(x),)


class Xlogy(RealFloatBinary):
    """x * log(y), 0 where x == 0 (even where log(y) is inf); NaN y stays NaN."""

    name = "xlogy"

    def saved(self, a, b, out):
        return (X0, X1)

    def fn(self, a, b):
        xp = self.device.xp
        with xp.errstate(divide="ignore", invalid="ignore"):
            out = a * xp.log(b)
        return xp.where((a == 0) & ~xp.isnan(b), 0.0, out).astype(out.dtype, copy=False)

    def backward(self, g):
        a, b = self.saved_tensors
        ga = gb = None
        if self.needs_grad(0):
            ga = where((a == 0) & (b <= 0), 0.0, xlogy(g, b))
        if self.needs_grad(1):
            gb = g * a / b
        return ga, gb


@public(method=True)
def erf(x: Tensor) -> Tensor:
    """The error function, 2/sqrt(pi) * integral of exp(-t^2) from 0 to x."""
    return apply(Erf(), x)


@public(method=True)
def erfc(x: Tensor) -> Tensor:
    """1 - erf(x), accurate where erf(x) is near 1."""
    return apply(Erfc(), x)


@public(method=True)
def erfinv(x: Tensor) -> Tensor:
    """The inverse of erf on [-1, 1]."""
    return apply(Erfinv(), x)


@public(method=True)
def lgamma(x: Tensor) -> Tensor:
    """log |Gamma(x)|."""
    return apply(Lgamma(), x)


@public(method=True)
def digamma(x: Tensor) -> Tensor:
    """The logarithmic derivative of Gamma, lgamma's gradient."""
    return apply(Digamma(), x)


@public(method=True)
def sinc(x: Tensor) -> Tensor:
    """The normalized sinc, sin(pi x) / (pi x), 1 at 0."""
    return apply(Sinc(), x)


@public(method=True)
def logit(x: Tensor, eps: float | None = None) -> Tensor:
    """log(x / (1 - x)), the inverse of sigmoid."""
    return apply(Logit(eps), x)


@public(method=True)
def nan_to_num(x: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """NaN, +inf and -inf replaced by nan, posinf and neginf (the dtype's largest finite
    values by default)."""
    return apply(NanToNum(nan, posinf, neginf), x)


@public(method=True)
def xlogy(x, y) -> Tensor:
    """x * log(y), 0 where x == 0; either may be a number."""
    if not isinstance(x, Tensor):
        x = _as_operand(x, y) if isinstance(x, _NUMBER) else _as_operand(x)
    if not isinstance(y, Tensor):
        y = _as_operand(y, x)
    return apply(Xlogy(), x, y)


# in place; torch has some as functions too (torch.erf_, but no torch.erfinv_: sf=False)
erf_ = public(method=True)(_inplace("erf_", erf))
erfc_ = public(method=True)(_inplace("erfc_", erfc))
erfinv_ = public(sf=False, method=True)(_inplace("erfinv_", erfinv))
lgamma_ = public(sf=False, method=True)(_inplace("lgamma_", lgamma))
digamma_ = public(sf=False, method=True)(_inplace("digamma_", digamma))
sinc_ = public(method=True)(_inplace("sinc_", sinc))
logit_ = public(method=True)(_inplace("logit_", logit))
nan_to_num_ = public(method=True)(_inplace("nan_to_num_", nan_to_num))
xlogy_ = public(method=True)(_inplace("xlogy_", xlogy))
