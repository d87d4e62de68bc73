"""shapeflow.special: PyTorch's torch.special, with gradients where PyTorch has them.

The kernels compute in float64 through the input's device (ops/elementwise/
special_functions.py); integer inputs give the default float dtype, as in PyTorch.
"""

from __future__ import annotations

import math

from . import dtypes as _dt
from .errors import ArgumentError
from .ops.activation import sigmoid as expit
from .ops.elementwise import special_functions as _F
from .ops.elementwise.special import digamma, erf, erfc, erfinv, logit, sinc, xlogy
from .ops.elementwise.special import lgamma as gammaln
from .ops.elementwise.trig import exp2
from .ops.elementwise.unary import expm1, log1p
from .ops.elementwise.unary import round as _round
from .ops.nn.softmax import log_softmax, softmax
from .ops.reduce.sums import logsumexp
from .tensor import Tensor

psi = digamma
ndtr = _F.special_ndtr
ndtri = _F.special_ndtri
log_ndtr = _F.special_log_ndtr
erfcx = _F.special_erfcx
entr = _F.special_entr
i0 = _F.special_i0
i0e = _F.special_i0e
i1 = _F.special_i1
i1e = _F.special_i1e
xlog1py = _F.xlog1py
zeta = _F.zeta_
gammainc = _F.special_gammainc
gammaincc = _F.special_gammaincc


def polygamma(n: int, input: Tensor) -> Tensor:  # noqa: A002  (PyTorch's argument name)
    """The n-th derivative of digamma (n = 0: digamma itself)."""
    if int(n) != n or n < 0:
        raise ArgumentError("polygamma(n, x) does not support negative n.", op="polygamma",
                            hint="n is the order of the derivative: 0, 1, 2, ...")
    return _F.special_polygamma(int(n), input)


def multigammaln(input: Tensor, p: int) -> Tensor:  # noqa: A002
    """The multivariate log-gamma of dimension p: sum of lgamma(x - j/2) + p(p-1)/4 log(pi)."""
    if p < 1:
        raise ArgumentError("p has to be greater than or equal to 1", op="multigammaln",
                            hint="p is the dimension, an integer >= 1")
    x = input if input.dtype.is_floating_point else input.to(_dt.default_float)
    out = gammaln(x)
    for j in range(1, p):
        out = out + gammaln(x - j / 2.0)
    return out + p * (p - 1) / 4.0 * math.log(math.pi)


def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001, A002
    """Rounded half to even, to `decimals` decimal places (negative: left of the point)."""
    if decimals == 0:
        return _round(input)
    if decimals > 0:
        scale = 10.0 ** decimals
        return _round(input * scale) / scale
    scale = 10.0 ** -decimals
    return _round(input / scale) * scale


def _polynomial(name: str):
    def fn(input, n) -> Tensor:  # noqa: A002
        return _F.polynomial("special_" + name, input, n)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name.replace('_', ' ').capitalize()} of degree n at input (no gradient)."
    return fn


def _no_grad_unary(name: str, op_cls):
    from .ops.base import apply

    def fn(input: Tensor) -> Tensor:  # noqa: A002
        return apply(op_cls(), input)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name.replace('_', ' ').capitalize()} (as torch.special's; no gradient)."
    return fn


globals().update({name: _polynomial(name) for name in _F.POLYNOMIALS})
globals().update({name: _no_grad_unary(name, cls) for name, cls in _F.NO_GRAD_OPS.items()})

__all__ = [
    "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc",
    "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax",
    "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
    "sinc", "softmax", "xlog1py", "xlogy", "zeta", *_F.POLYNOMIALS, *_F.NO_GRAD_OPS,
]
