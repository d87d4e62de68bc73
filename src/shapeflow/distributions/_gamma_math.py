"""Gamma sampling with implicit reparameterization gradients, and the regularized incomplete
gamma function, in NumPy (torch's _standard_gamma and igamma, which NumPy lacks).

A sample x of Gamma(a, 1) moves with a as dx/da = -(dP(a, x)/da) / p(x; a), P the CDF
(Figurnov et al. 2018). dP/da is a central difference of P in a: P is smooth in a and
evaluated to ~1e-15, so the gradient is good to ~1e-8 relative."""

from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..ops.elementwise.special_kernels import lgamma as _lgamma
from ..random import get_rng
from ..tensor import Tensor, tensor

_ITERS = 2000  # series and continued fraction stop early; this bounds a ~ 1e5


def _log_prefactor(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    return a * np.log(x) - x - _lgamma(a)


def _p_series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P(a, x) by its power series (for x < a + 1)."""
    term = 1.0 / a
    total, ap = term.copy(), a.copy()
    for _ in range(_ITERS):
        ap = ap + 1
        term = term * x / ap
        total = total + term
        if np.all(np.abs(term) <= np.abs(total) * 1e-17):
            break
    return total * np.exp(_log_prefactor(a, x))


def _q_fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) = 1 - P(a, x) by its continued fraction (Lentz; for x >= a + 1)."""
    tiny = 1e-300
    b = x + 1 - a
    c = np.full_like(x, 1 / tiny)
    d = 1 / b
    h = d.copy()
    for i in range(1, _ITERS):
        an = -i * (i - a)
        b = b + 2
        d = an * d + b
        d = np.where(np.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = np.where(np.abs(c) < tiny, tiny, c)
        d = 1 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1) <= 1e-16):
            break
    return np.exp(_log_prefactor(a, x)) * h


def gammainc(a: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P(a, x), dP/da) elementwise, in float64."""
    a, x = (np.array(v, dtype=np.float64) for v in np.broadcast_arrays(a, x))
    p, dpda = np.zeros_like(a), np.zeros_like(a)
    x = np.maximum(x, 0)
    pos = x > 0
    series = pos & (x < a + 1)
    frac = pos & ~series
    if series.any():
        aa, xx = a[series], x[series]
        h = 1e-4 * aa  # same branch on both sides: the difference is of one smooth formula
        p[series] = _p_series(aa, xx)
        dpda[series] = (_p_series(aa + h, xx) - _p_series(aa - h, xx)) / (2 * h)
    if frac.any():
        aa, xx = a[frac], x[frac]
        h = 1e-4 * aa
        p[frac] = 1 - _q_fraction(aa, xx)
        dpda[frac] = -(_q_fraction(aa + h, xx) - _q_fraction(aa - h, xx)) / (2 * h)
    return p, dpda


def standard_gamma_grad(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """dx/da for samples x of Gamma(a, 1), by implicit differentiation of the CDF."""
    _, dpda = gammainc(a, x)
    with np.errstate(divide="ignore", over="ignore"):
        pdf = np.exp(_log_prefactor(a, x) - np.log(x))
        return -dpda / pdf


def _through(value: np.ndarray, like: Tensor, *pairs: tuple[Tensor, np.ndarray]) -> Tensor:
    """value as a tensor whose gradient w.r.t. each t in pairs is the given d value / d t."""
    out = tensor(value.astype(like.dtype.np, copy=False))
    if not grad_mode.is_grad_enabled():
        return out
    for t, grad in pairs:
        if t.requires_grad:  # adds zero to the value, and grad * dt to the gradient
            out = out + (t - t.detach()) * tensor(grad.astype(like.dtype.np, copy=False))
    return out


def standard_gamma(concentration: Tensor) -> Tensor:
    """Gamma(concentration, 1) samples with implicit reparameterization gradients."""
    a = concentration.detach().numpy().astype(np.float64)
    x = get_rng(None).standard_gamma(a)
    x = np.maximum(x, np.finfo(concentration.dtype.np).tiny)  # as torch: never exactly 0
    if not (concentration.requires_grad and grad_mode.is_grad_enabled()):
        return tensor(x.astype(concentration.dtype.np))
    return _through(x, concentration, (concentration, standard_gamma_grad(a, x)))


def regularized_gamma(a: Tensor, x: Tensor) -> Tensor:
    """P(a, x) (torch.special.gammainc) with first-order gradients w.r.t. a and x."""
    an, xn = a.detach().numpy().astype(np.float64), x.detach().numpy().astype(np.float64)
    p, dpda = gammainc(an, xn)
    an, xn = np.broadcast_arrays(an, xn)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        dpdx = np.where(xn > 0, np.exp(_log_prefactor(an, np.maximum(xn, 1e-300))
                                       - np.log(np.maximum(xn, 1e-300))), 0.0)
    return _through(p, a, (a, dpda), (x, dpdx))
