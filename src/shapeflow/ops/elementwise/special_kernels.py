"""Kernels of the special functions NumPy lacks: erf, erfc, erfinv, lgamma, digamma.

Each takes `xp`, the array namespace of the device it runs on (NumPy's API; the host's NumPy
by default, for callers holding host arrays), and computes in float64 (callers cast).
erf/erfc evaluate fdlibm's rational approximations (Sun's s_erf.c, the one glibc and Go use:
error < 1 ulp) region by region on the elements that fall in each, so the cost is a few
passes per element (~15x faster than a Python-level `math.erf` per element). erfinv refines
a rational first guess with Newton steps on erf (erfc near +-1, where erf has no digits
left). digamma and trigamma shift to x >= 10 and sum the asymptotic series; lgamma is libm's
`math.lgamma` per element, on the host (exact, ~0.2 us each).
"""

from __future__ import annotations

import math

from ...device import cpu

_HOST = cpu.xp  # NumPy: the namespace of callers that hold host arrays

# fdlibm s_erf.c coefficients
_ERX = 8.45062911510467529297e-01
_EFX = 1.28379167095512586316e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
       5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
       7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02,
       1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
       4.34565877475229228821e+02, 6.45387271733267880336e+02, 4.29008140027567833386e+02,
       1.08635005541779435134e+02, 6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
       1.53672958608443695994e+03, 3.19985821950859553908e+03, 2.55305040643316442583e+03,
       4.74528541206955367215e+02, -2.24409524465858183362e+01)


def _poly(z, coefs, xp):
    """c0 + c1 z + c2 z^2 + ... by Horner's rule."""
    out = xp.full_like(z, coefs[-1])
    for c in coefs[-2::-1]:
        out *= z
        out += c
    return out


def _erf_erfc(x, xp):
    """erf(|x|) and erfc(|x|) of float64 x, each where it is accurate (fdlibm's regions)."""
    a = xp.abs(x)
    erf = xp.empty_like(a)
    erfc = xp.empty_like(a)
    small = a < 0.84375
    mid = (a >= 0.84375) & (a < 1.25)
    tail = a >= 1.25  # NaN falls in no region and is set below
    if small.any():
        s = a[small]
        z = s * s
        y = _poly(z, _PP, xp) / _poly(z, _QQ, xp)
        e = s + s * y
        erf[small] = e
        # erfc near 0.5 loses less as 0.5 - (x*y + (x - 0.5)), fdlibm's form
        erfc[small] = xp.where(s < 0.25, 1.0 - e, 0.5 - (s * y + (s - 0.5)))
    if mid.any():
        s = a[mid] - 1.0
        pq = _poly(s, _PA, xp) / _poly(s, _QA, xp)
        erf[mid] = _ERX + pq
        erfc[mid] = (1.0 - _ERX) - pq
    if tail.any():
        s = xp.minimum(a[tail], 28.0)  # erfc underflows to 0 past 28 (as exp does below)
        z = 1.0 / (s * s)
        near = s < 1.0 / 0.35
        rs = xp.where(near, _poly(z, _RA, xp) / _poly(z, _SA, xp),
                      _poly(z, _RB, xp) / _poly(z, _SB, xp))
        # exp(-x^2) as exp(-h^2) exp((h - x)(h + x)) with h = x to 20 bits: no lost digits
        h = (s.view(xp.uint64) & xp.uint64(0xFFFFFFFF00000000)).view(xp.float64)
        with xp.errstate(under="ignore"):
            r = xp.exp(-h * h - 0.5625) * xp.exp((h - s) * (h + s) + rs) / s
        r = xp.where(a[tail] >= 28.0, 0.0, r)
        erfc[tail] = r
        erf[tail] = 1.0 - r
    nan = xp.isnan(a)
    if nan.any():
        erf[nan] = xp.nan
        erfc[nan] = xp.nan
    return erf, erfc


def erf(x, xp=_HOST):
    """The error function of float64 x."""
    e, _ = _erf_erfc(x, xp)
    return xp.copysign(e, x)


def erfc(x, xp=_HOST):
    """1 - erf(x) of float64 x, accurate where it is tiny (large x)."""
    e, c = _erf_erfc(x, xp)
    return xp.where(x < 0, 1.0 + e, c)


# A first guess for erfinv (rational fits, ~1e-7), refined by Newton steps below.
_A = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_B = (1.0, -2.118377725, 1.442710462, -0.329097515, 0.012229801)
_C = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_D = (1.0, 3.543889200, 1.637067800)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erfinv(y, xp=_HOST):
    """The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside) for float64 y."""
    a = xp.abs(y)
    with xp.errstate(divide="ignore", invalid="ignore"):
        z = y * y
        central = y * _poly(z, _A, xp) / _poly(z, _B, xp)
        t = xp.sqrt(-xp.log((1.0 - xp.minimum(a, 1.0)) / 2.0))
        outer = xp.copysign(_poly(t, _C, xp), y) / _poly(t, _D, xp)
        x = xp.where(a <= 0.7, central, outer)
        x = xp.where(xp.isfinite(x), x, 0.0)
        # Newton on erf(x) = y centrally; on erfc(|x|) = 1 - |y| outside (1 - |y| is exact
        # there, and erf(x) - y would be all rounding as erf(x) nears 1)
        far = a > 0.5
        for _ in range(3):
            e, c = _erf_erfc(x, xp)
            step = xp.where(far, xp.sign(y) * (c - (1.0 - a)), -(xp.copysign(e, x) - y))
            x = x + step / (_TWO_OVER_SQRT_PI * xp.exp(-x * x))
    x = xp.where(a == 1.0, xp.copysign(xp.inf, y), x)
    return xp.where((a > 1.0) | xp.isnan(y), xp.nan, x)


def _lgamma_one(v: float) -> float:
    try:
        return math.lgamma(v)
    except ValueError:  # poles at 0, -1, -2, ...: +inf, as PyTorch and C's lgamma give
        return math.inf


def lgamma(x, xp=_HOST):
    """log |Gamma(x)| of float64 x (+inf at the poles)."""
    # libm per element: the values pass through the host as Python floats and come back
    out = xp.asarray([_lgamma_one(v) for v in x.ravel().tolist()], dtype=xp.float64)
    return out.reshape(x.shape)


# Bernoulli numbers B_2k / (2k) for digamma's series, and B_2k for trigamma's
_PSI = (1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760, 1.0 / 12)
_PSI1 = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6)


def _shift(x, term, xp):
    """x moved up to >= 10 by the recurrence; the sum of term(x) over the steps taken."""
    acc = xp.zeros_like(x)
    for _ in range(10):
        low = x < 10.0
        if not low.any():
            break
        acc -= xp.where(low, term(x), 0.0)
        x = xp.where(low, x + 1.0, x)
    return x, acc


def digamma(x, xp=_HOST):
    """psi(x) = d/dx log Gamma(x) of float64 x (NaN at negative integers, -inf at +0)."""
    with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
        neg = x < 0.0
        # psi(x) = psi(1 - x) - pi / tan(pi x) for x < 0
        refl = xp.where(neg, -math.pi / xp.tan(math.pi * (x - xp.floor(x))), 0.0)
        v = xp.where(neg, 1.0 - x, x)
        v, acc = _shift(v, lambda t: 1.0 / t, xp)
        w = 1.0 / (v * v)
        series = xp.log(v) - 0.5 / v - w * _poly(w, _PSI, xp)
        out = series + acc + refl
        out = xp.where(x == 0.0, xp.copysign(xp.inf, -x), out)
        out = xp.where(neg & (x == xp.floor(x)), xp.nan, out)
        return xp.where(x == xp.inf, xp.inf, out)


def trigamma(x, xp=_HOST):
    """psi'(x) of float64 x (the gradient of digamma); +inf at 0 and the negative integers."""
    with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
        neg = x < 0.5
        # psi'(1 - x) + psi'(x) = pi^2 / sin^2(pi x)
        s = xp.sin(math.pi * x)
        refl = xp.where(neg, (math.pi * math.pi) / (s * s), 0.0)
        v = xp.where(neg, 1.0 - x, x)
        v, acc = _shift(v, lambda t: -1.0 / (t * t), xp)
        w = 1.0 / (v * v)
        series = 1.0 / v + 0.5 * w + w / v * _poly(w, _PSI1, xp)
        out = xp.where(neg, refl - (series + acc), series + acc)
        out = xp.where(neg & (x == xp.floor(x)), xp.inf, out)
        return xp.where(x == xp.inf, 0.0, out)
