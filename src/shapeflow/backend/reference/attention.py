"""The attention family's portable kernels, written against `self.xp`: the softmax parts of
one block of flash attention, its dropout tiles and its casts of 16-bit blocks.

Each block kernel takes a C-contiguous block of scores s [..., nq, n] (a product's result)
of the queries i0 .. i0 + nq against the keys j0 .. j0 + n, and `causal`: i0 - j0 when a
query may see only the keys up to its own position (top-left aligned), else None. `scale`
multiplies the raw scores (1 where the caller has already scaled them and added a mask).
The walk over blocks is ops/nn/flash_attention.py's.
"""

from __future__ import annotations

import numpy as np  # the host generator of the dropout tiles (moved onto the device)

from .base import into

_NEG_INF = float("-inf")


class AttentionKernels:
    """attention kernels (a mixin of ReferenceKernels)."""

    def flash_softmax_lse(self, s, scale: float, causal: int | None, out=None):
        """s <- softmax(s * scale) in place (rows that see nothing: 0); returns the row
        logsumexp (-inf for those rows): the only key panel of a block."""
        xp = self.xp
        lse = xp.empty(s.shape[:-1], xp.float64 if s.dtype == xp.float64 else xp.float32) \
            if out is None else out
        self.ran("flash_softmax_lse", self.path)
        top = self._scaled_max(s, scale, causal)
        shift = xp.where(xp.isneginf(top), 0, top)
        xp.subtract(s, shift[..., None], out=s)
        xp.exp(s, out=s)
        denom = s.sum(axis=-1)
        empty = denom == 0  # a row that sees nothing: zeros, as the math path's safe softmax
        s /= xp.where(empty, 1, denom)[..., None]
        lse[...] = xp.where(empty, _NEG_INF, shift + xp.log(xp.where(empty, 1, denom)))
        return lse

    def flash_online(self, s, m, l, scale: float, causal: int | None, first: bool,
                     out=None):
        """One key panel of several: s <- exp(s * scale - new row max); the running max m
        and sum l [..., nq] are updated in place; returns the factor the running output
        fades by."""
        xp = self.xp
        fade = xp.empty(m.shape, m.dtype) if out is None else out
        self.ran("flash_online", self.path)
        bm = self._scaled_max(s, scale, causal)
        top = bm if first else xp.maximum(m, bm)
        shift = xp.where(xp.isneginf(top), 0, top)  # rows with nothing seen yet
        xp.subtract(s, shift[..., None], out=s)
        xp.exp(s, out=s)
        if first:
            fade[...] = 0
            l[...] = s.sum(axis=-1)
        else:
            fade[...] = xp.exp(m - shift)
            l[...] = l * fade + s.sum(axis=-1)
        m[...] = top
        return fade

    def flash_grad(self, s, dp, lse, delta, scale: float, ds_scale: float,
                   causal: int | None):
        """In place: s <- p = exp(s * scale - lse) (the block's probabilities, recomputed)
        and dp <- p * (dp - delta) * ds_scale, delta = rowsum(dO * O) = rowsum(P * dP)."""
        xp = self.xp
        self.ran("flash_grad", self.path)
        s *= s.dtype.type(scale)
        if causal is not None:
            xp.copyto(s, _NEG_INF, where=self._hidden(s.shape[-2], s.shape[-1], causal))
        xp.subtract(s, xp.where(xp.isneginf(lse), float("inf"), lse)[..., None], out=s)
        xp.exp(s, out=s)
        dp -= delta[..., None]
        dp *= s
        dp *= dp.dtype.type(ds_scale)
        return s, dp

    def _hidden(self, nq: int, n: int, causal: int):
        """[nq, n] bool: True where query i0 + r may not see key j0 + j (j > r + i0 - j0)."""
        xp = self.xp
        return xp.arange(n)[None, :] > (causal + xp.arange(nq))[:, None]

    def _scaled_max(self, s, scale: float, causal: int | None):
        """s *= scale with the causally hidden entries set to -inf, in place; the row max."""
        xp = self.xp
        s *= s.dtype.type(scale)
        if causal is not None:
            xp.copyto(s, _NEG_INF, where=self._hidden(s.shape[-2], s.shape[-1], causal))
        return s.max(axis=-1) if s.shape[-1] else xp.full(s.shape[:-1], _NEG_INF, s.dtype)

    def flash_dropout_keep(self, seed: int, g0: int, i0: int, j0: int, shape, p: float):
        """The dropout mask of tile (i0, j0) of the batch group from g0, scaled by
        1 / (1 - p): drawn from a generator seeded by the tile, so forward and backward draw
        the same one (host bits, moved onto the device)."""
        rng = np.random.default_rng([seed, g0, i0, j0])
        draw = self.xp.asarray(rng.random(shape, dtype=np.float32))
        scale = np.float32(1.0 / (1.0 - p) if p < 1 else 0.0)
        return self.xp.multiply(draw >= p, scale, out=draw)  # the draw's buffer, reused

    # ---- the casts of 16-bit blocks (float32 inside, one rounding) -------------------------
    def attention_widen(self, x, work, out=None):
        """x (a 16-bit float array, or any other) as a C-contiguous array of `work`."""
        return into(self.xp.ascontiguousarray(x, work), out)

    def attention_narrow(self, x32, dtype, out=None):
        """A float32 block rounded to `dtype` (nearest even)."""
        return into(x32.astype(dtype), out)
