"""The softmax parts of one block of flash attention: compiled for float32, else NumPy.

Each takes a C-contiguous block of scores s [..., nq, n] (a matmul's result) of the queries
i0 .. i0 + nq against the keys j0 .. j0 + n, and `causal`: i0 - j0 when a query may see only
the keys up to its own position (top-left aligned), else None. `scale` multiplies the raw
scores (1 where the caller has already scaled them and added a mask).
"""

from __future__ import annotations

import numpy as np

from ...backend.cpu import kernels


def softmax_lse(s: np.ndarray, scale: float, causal: int | None) -> np.ndarray:
    """s <- softmax(s * scale) in place (rows that see nothing: 0); returns the row logsumexp
    (-inf for those rows): the only key panel of a block, in one pass when compiled."""
    n = s.shape[-1]
    lse = np.empty(s.shape[:-1], np.float64 if s.dtype == np.float64 else np.float32)
    if kernels.flash_softmax_lse(s.reshape(-1, n), lse, scale, *_period(s, causal)):
        return lse
    top = _scaled_max(s, scale, causal)
    shift = np.where(np.isneginf(top), 0, top)
    np.subtract(s, shift[..., None], out=s)
    np.exp(s, out=s)
    denom = s.sum(axis=-1)
    empty = denom == 0  # a row that sees nothing: zeros, as the math path's safe softmax
    s /= np.where(empty, 1, denom)[..., None]
    lse[...] = np.where(empty, -np.inf, shift + np.log(np.where(empty, 1, denom)))
    return lse


def online(s: np.ndarray, m: np.ndarray, l: np.ndarray, scale: float, causal: int | None,
           first: bool) -> np.ndarray:
    """One key panel of several: s <- exp(s * scale - new row max); the running max m and
    sum l [..., nq] are updated in place; returns the factor the running output fades by."""
    n = s.shape[-1]
    fade = np.empty(m.shape, m.dtype)
    if kernels.flash_online(s.reshape(-1, n), m, l, fade, scale, *_period(s, causal), first):
        return fade
    bm = _scaled_max(s, scale, causal)
    top = bm if first else np.maximum(m, bm)
    shift = np.where(np.isneginf(top), 0, top)  # rows with nothing seen yet
    np.subtract(s, shift[..., None], out=s)
    np.exp(s, out=s)
    if first:
        fade[...] = 0
        l[...] = s.sum(axis=-1)
    else:
        fade[...] = np.exp(m - shift)
        l[...] = l * fade + s.sum(axis=-1)
    m[...] = top
    return fade


def grad(s: np.ndarray, dp: np.ndarray, lse: np.ndarray, delta: np.ndarray, scale: float,
         ds_scale: float, causal: int | None) -> None:
    """In place: s <- p = exp(s * scale - lse) (the block's probabilities, recomputed) and
    dp <- p * (dp - delta) * ds_scale, delta = rowsum(dO * O) = rowsum(P * dP)."""
    n = s.shape[-1]
    if kernels.flash_grad(s.reshape(-1, n), dp.reshape(-1, n), lse, delta, scale, ds_scale,
                          *_period(s, causal)):
        return
    s *= s.dtype.type(scale)
    if causal is not None:
        np.copyto(s, -np.inf, where=_hidden(s.shape[-2], n, causal))
    np.subtract(s, np.where(np.isneginf(lse), np.inf, lse)[..., None], out=s)
    np.exp(s, out=s)
    dp -= delta[..., None]
    dp *= s
    dp *= dp.dtype.type(ds_scale)


def _period(s: np.ndarray, causal: int | None) -> tuple[int, int]:
    """(period, offset) of the compiled kernels: row r is query r % period of the block."""
    return (0, 0) if causal is None else (s.shape[-2], causal)


def _hidden(nq: int, n: int, causal: int) -> np.ndarray:
    """[nq, n] bool: True where query i0 + r may not see key j0 + j (j > r + i0 - j0)."""
    return np.arange(n)[None, :] > (causal + np.arange(nq))[:, None]


def _scaled_max(s: np.ndarray, scale: float, causal: int | None) -> np.ndarray:
    """s *= scale with the causally hidden entries set to -inf, in place; the row max."""
    s *= s.dtype.type(scale)
    if causal is not None:
        np.copyto(s, -np.inf, where=_hidden(s.shape[-2], s.shape[-1], causal))
    return s.max(axis=-1) if s.shape[-1] else np.full(s.shape[:-1], -np.inf, s.dtype)
