"""Window functions, as torch.signal.windows (bartlett, blackman, cosine, exponential,
gaussian, general_cosine, general_hamming, hamming, hann, kaiser, nuttall: `sym=True` for
filter design, False for spectra) and torch's older factories (hann_window, hamming_window,
blackman_window, bartlett_window, kaiser_window: `periodic=True` is `sym=False`).

Each is computed in float64 with NumPy from its formula and given the requested float dtype;
no gradient flows into a window (it is made from numbers, as a factory's output).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..errors import ArgumentError, DTypeError
from ..factories import check_layout
from ..tensor import Tensor

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]
FACTORIES = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
             "kaiser_window"]


def _checked(name: str, M, dtype, layout):
    """The dtype to make, after PyTorch's checks of M, layout and dtype."""
    if isinstance(M, bool) or not isinstance(M, (int, np.integer)):
        raise ArgumentError(f"{name}: the window length must be an int, got {M!r}", op=name)
    if M < 0:
        raise ArgumentError(f"{name} requires non-negative window length, got M={M}", op=name)
    check_layout(layout, name)
    dt = _dt.get_default_dtype() if dtype is None else _dt.get_dtype(dtype)
    if not dt.is_floating_point:
        raise DTypeError(f"{name} expects floating point dtypes, got {dt}", op=name,
                         hint="pass dtype=sf.float32 or sf.float64")
    return dt


def _make(values: np.ndarray, dt, device, requires_grad: bool) -> Tensor:
    from ..factories import tensor

    return tensor(values.astype(dt.np), dtype=dt, device=device, requires_grad=requires_grad)


def _grid(M: int, sym: bool) -> tuple[np.ndarray, int]:
    """n = 0 .. M-1 and the denominator of the window's phase (M - 1, or M when periodic)."""
    return np.arange(M, dtype=np.float64), (M - 1 if sym else M)


def _cosine_sum(M: int, a, sym: bool) -> np.ndarray:
    if M == 1:
        return np.ones(1)
    n, den = _grid(M, sym)
    return sum((-1) ** i * c * np.cos(2 * math.pi * i * n / den) for i, c in enumerate(a))


# ---- torch.signal.windows ------------------------------------------------------------------

def general_cosine(M: int, *, a, sym: bool = True, dtype=None, layout=None, device=None,
                   requires_grad: bool = False) -> Tensor:
    """sum_k (-1)^k a[k] cos(2 pi k n / (M - 1)) (M when not sym)."""
    dt = _checked("general_cosine", M, dtype, layout)
    if isinstance(a, (str, bytes)) or not hasattr(a, "__iter__"):
        raise DTypeError("general_cosine: coefficients must be a list/tuple",
                         op="general_cosine")
    a = [float(c) for c in a]
    if not a:
        raise ArgumentError("general_cosine: coefficients cannot be empty", op="general_cosine")
    return _make(_cosine_sum(M, a, sym) if M else np.zeros(0), dt, device, requires_grad)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype=None, layout=None,
                    device=None, requires_grad: bool = False) -> Tensor:
    """alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """The Hamming window (general_hamming with alpha 0.54)."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
         requires_grad: bool = False) -> Tensor:
    """The Hann window (general_hamming with alpha 0.5)."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The Blackman window (cosine sum 0.42, 0.5, 0.08)."""
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """The minimum 4-term Blackman-Harris window of Nuttall."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)


def bartlett(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """The triangular window 1 - |2n / (M - 1) - 1| (M when not sym)."""
    dt = _checked("bartlett", M, dtype, layout)
    if M <= 1:
        return _make(np.ones(M), dt, device, requires_grad)
    n, den = _grid(M, sym)
    return _make(1 - np.abs(2 * n / den - 1), dt, device, requires_grad)


def cosine(M: int, *, sym: bool = True, dtype=None, layout=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """The sine window sin(pi (n + 0.5) / M) (M + 1 when not sym)."""
    dt = _checked("cosine", M, dtype, layout)
    den = M + 1 if not sym and M > 1 else M
    return _make(np.sin(math.pi * (np.arange(M) + 0.5) / max(den, 1)), dt, device,
                 requires_grad)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True,
                dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """exp(-|n - center| / tau), centred on the middle unless center is given (not sym)."""
    dt = _checked("exponential", M, dtype, layout)
    if tau <= 0:
        raise ArgumentError(f"exponential: tau must be positive, got {tau}", op="exponential")
    if sym and center is not None:
        raise ArgumentError("exponential: center must be None for symmetric windows",
                            op="exponential", hint="pass sym=False to place the center")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    return _make(np.exp(-np.abs(np.arange(M) - center) / tau), dt, device, requires_grad)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype=None, layout=None,
             device=None, requires_grad: bool = False) -> Tensor:
    """exp(-(n - c)^2 / (2 std^2)) around the middle c."""
    dt = _checked("gaussian", M, dtype, layout)
    if std <= 0:
        raise ArgumentError(f"gaussian: standard deviation must be positive, got {std}",
                            op="gaussian")
    c = (M if not sym and M > 1 else M - 1) / 2.0
    return _make(np.exp(-((np.arange(M) - c) ** 2) / (2 * std * std)), dt, device,
                 requires_grad)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype=None, layout=None,
           device=None, requires_grad: bool = False) -> Tensor:
    """I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta) (M when not sym)."""
    dt = _checked("kaiser", M, dtype, layout)
    if beta < 0:
        raise ArgumentError(f"kaiser: beta must be non-negative, got {beta}", op="kaiser")
    if M <= 1:
        return _make(np.ones(M), dt, device, requires_grad)
    n, den = _grid(M, sym)
    r = np.minimum(2 * n / den - 1, 1.0)  # the last point of a periodic window stays inside
    return _make(np.i0(beta * np.sqrt(np.maximum(1 - r * r, 0.0))) / np.i0(beta), dt, device,
                 requires_grad)


# ---- torch's factories: hann_window(L, periodic=True) ... --------------------------------

def _factory(name: str, L: int, periodic: bool, dtype, layout, device, requires_grad,
             values) -> Tensor:
    dt = _checked(name, L, dtype, layout)
    if L <= 1:
        return _make(np.ones(L), dt, device, requires_grad)
    n = L + 1 if periodic else L  # a periodic window is a symmetric one of L + 1, cut
    return _make(values(np.arange(n, dtype=np.float64), n - 1)[:L], dt, device, requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                device=None, requires_grad: bool = False) -> Tensor:
    """0.5 - 0.5 cos(2 pi n / (N - 1)) (N = L + 1 when periodic, cut to L)."""
    return _factory("hann_window", window_length, periodic, dtype, layout, device,
                    requires_grad, lambda n, d: 0.5 - 0.5 * np.cos(2 * math.pi * n / d))


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype=None, layout=None, device=None,
                   requires_grad: bool = False) -> Tensor:
    """alpha - beta cos(2 pi n / (N - 1))."""
    return _factory("hamming_window", window_length, periodic, dtype, layout, device,
                    requires_grad, lambda n, d: alpha - beta * np.cos(2 * math.pi * n / d))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, requires_grad: bool = False) -> Tensor:
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    return _factory("blackman_window", window_length, periodic, dtype, layout, device,
                    requires_grad, lambda n, d: 0.42 - 0.5 * np.cos(2 * math.pi * n / d)
                    + 0.08 * np.cos(4 * math.pi * n / d))


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, layout=None,
                    device=None, requires_grad: bool = False) -> Tensor:
    """1 - |2n / (N - 1) - 1|."""
    return _factory("bartlett_window", window_length, periodic, dtype, layout, device,
                    requires_grad, lambda n, d: 1 - np.abs(2 * n / d - 1))


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype=None, layout=None, device=None, requires_grad: bool = False) -> Tensor:
    """I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta)."""
    return _factory("kaiser_window", window_length, periodic, dtype, layout, device,
                    requires_grad, lambda n, d: np.i0(beta * np.sqrt(np.maximum(
                        1 - (2 * n / d - 1) ** 2, 0.0))) / np.i0(beta))
