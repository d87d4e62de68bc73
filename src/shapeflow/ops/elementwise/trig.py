"""More unary math: tan, inverse and hyperbolic trig, log2/log10/exp2, frac, copysign.

Each is a float-valued Unary (integers compute in the default float, as PyTorch); gradients
are Tensor ops, so grad of grad works.
"""

from __future__ import annotations

import math

from ...tensor import Tensor
from ..base import OUT, X0, apply
from ..registry import public
from ._common import _as_operand
from .binary import RealFloatBinary
from .compare import where, zeros_scalar_like
from .unary import Unary


class _Quiet(Unary):
    """A unary op whose domain errors give NaN/inf quietly, as in PyTorch."""

    def forward(self, x):
        with self.device.xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return Unary.forward(self, x)


class Tan(_Quiet):
    name = "tan"
    ufunc = "tan"

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * (out * out + 1.0),)


class Asin(_Quiet):
    name = "asin"
    ufunc = "arcsin"

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * (1.0 - x * x).rsqrt(),)


class Acos(Asin):
    name = "acos"
    ufunc = "arccos"

    def backward(self, g):
        (x,) = self.saved_tensors
        return (-g * (1.0 - x * x).rsqrt(),)


class Atan(_Quiet):
    name = "atan"
    ufunc = "arctan"

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g / (x * x + 1.0),)


class Sinh(_Quiet):
    name = "sinh"
    ufunc = "sinh"

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * cosh(x),)


class Cosh(_Quiet):
    name = "cosh"
    ufunc = "cosh"

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * sinh(x),)


class Asinh(_Quiet):
    name = "asinh"
    ufunc = "arcsinh"

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * (x * x + 1.0).rsqrt(),)


class Acosh(Asinh):
    name = "acosh"
    ufunc = "arccosh"

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * (x * x - 1.0).rsqrt(),)


class Atanh(Asinh):
    name = "atanh"
    ufunc = "arctanh"

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g / (1.0 - x * x),)


class Log2(_Quiet):
    name = "log2"
    ufunc = "log2"
    scale = 1.0 / math.log(2.0)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g / (x * (1.0 / self.scale)),)


class Log10(Log2):
    name = "log10"
    ufunc = "log10"
    scale = 1.0 / math.log(10.0)


class Exp2(_Quiet):
    name = "exp2"
    ufunc = "exp2"

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * out * math.log(2.0),)


class Frac(_Quiet):
    """x - trunc(x), sign of x; the gradient passes through (as PyTorch)."""

    name = "frac"

    def fn(self, x):
        return x - self.device.xp.trunc(x)

    def infer(self, x):
        if not x.dtype.is_floating_point:
            from ...errors import DTypeNotImplementedError

            raise DTypeNotImplementedError(f"frac: not implemented for {x.dtype}", op="frac")
        return x.shape, x.dtype

    def backward(self, g):
        return (g,)


class Copysign(RealFloatBinary):
    """|a| with the sign of b (its sign bit: -0.0 counts as negative); floats only out."""

    name = "copysign"

    def saved(self, a, b, out):
        return (X0, OUT) if a.requires_grad else ()

    ufunc = "copysign"

    def backward(self, g):
        # the sign's gradient is zero (PyTorch gives zeros, not None)
        gb = g * 0.0 if self.needs_grad(1) else None
        if not self.needs_grad(0):
            return None, gb
        a, out = self.saved_tensors
        # d out / d a = out / a = +-1; PyTorch gives 0 where a == 0
        zero = zeros_scalar_like(g)
        ratio = where(a == 0, zero, out / where(a == 0, zero + 1.0, a))
        return g * ratio, gb


def _unary(cls):
    def fn(input: Tensor) -> Tensor:
        return apply(cls(), input)

    fn.__name__ = cls.name
    fn.__doc__ = f"Elementwise {cls.name} (as torch.{cls.name})."
    return fn


tan, asin, acos, atan = _unary(Tan), _unary(Asin), _unary(Acos), _unary(Atan)
sinh, cosh, asinh, acosh, atanh = (_unary(Sinh), _unary(Cosh), _unary(Asinh), _unary(Acosh),
                                   _unary(Atanh))
log2, log10, exp2, frac = _unary(Log2), _unary(Log10), _unary(Exp2), _unary(Frac)
arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh
for _fn in (tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, log2, log10, exp2, frac):
    public(method=True)(_fn)  # sf.tan and t.tan(), ...
for _alias, _fn in (("arcsin", asin), ("arccos", acos), ("arctan", atan), ("arcsinh", asinh),
                    ("arccosh", acosh), ("arctanh", atanh)):
    public(sf=_alias, method=_alias)(_fn)  # NumPy's names


@public(method=True)
def copysign(input, other) -> Tensor:
    """|input| with the sign of other (a number or a tensor)."""
    a = _as_operand(input, other if isinstance(other, Tensor) else None)
    return apply(Copysign(), a, _as_operand(other, a))
