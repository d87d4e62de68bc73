"""Blockwise ("flash") scaled-dot-product attention: O(L) saved, not O(L * S).

Forward walks blocks of queries and keys with an online softmax (a running max and sum per
row), so the [L, S] probabilities never exist at once; it saves q, k, v, the output and the
row logsumexp [..., L] (float32), as PyTorch's CPU flash kernel does. Backward recomputes
each block's probabilities from the logsumexp. Causal blocks above the diagonal are skipped;
dropout masks are drawn per block from a seed saved with the op (a few bytes), so backward
draws the same ones instead of keeping them.
"""

from __future__ import annotations

import enum
import threading

import numpy as np

from ... import dtypes as _dt
from ...errors import GraphError
from ...random import get_rng
from ...tensor import Tensor
from ..base import ATTENTION, LAYER_INPUT, Saved
from ._common import _compute_np, _create_graph
from .attention import Attention

BLOCK = 128  # queries and keys per block: [B, H, 128, 128] float32 temporaries


class FlashAttention(Attention):
    """softmax(q @ k^T * scale + mask) @ v in blocks; saves out and logsumexp, not P."""

    def saved(self, q, k, v, *mask, out):
        kept = (Saved.input(0, LAYER_INPUT), Saved.input(1, LAYER_INPUT),
                Saved.input(2, LAYER_INPUT))
        if mask:
            kept += (Saved.input(3),)
        lse = _dt.float64 if q.dtype is _dt.float64 else _dt.float32
        return kept + (Saved.output(ATTENTION),
                       Saved.new("logsumexp", self.scores_shape[:-1], lse, ATTENTION))

    def forward(self, q, k, v, mask=None):
        work = np.dtype(_compute_np(_dt.from_numpy_dtype(q.dtype)))
        q, k, v, mask = _broadcast(q, k, v, mask)
        L, S = q.shape[-2], k.shape[-2]
        scale = work.type(self.scale if self.scale is not None else q.shape[-1] ** -0.5)
        out = np.empty(q.shape[:-1] + (v.shape[-1],), work)
        lse = np.empty(q.shape[:-1], np.float64 if work == np.float64 else np.float32)
        self.seed = int(get_rng(self.generator).integers(2**62)) if self.p > 0 else None
        for i0 in range(0, L, BLOCK):
            i1 = min(i0 + BLOCK, L)
            qb = q[..., i0:i1, :].astype(work, copy=False)
            m = np.full(qb.shape[:-1], -np.inf, work)  # running row max
            denom = np.zeros(qb.shape[:-1], work)      # running row sum of exp
            acc = np.zeros(qb.shape[:-1] + (v.shape[-1],), work)
            for j0, j1 in self._key_blocks(i0, i1, S):
                s = self._scores(qb, k, mask, scale, i0, i1, j0, j1, work)
                m_new = np.maximum(m, s.max(axis=-1))
                shift = np.where(np.isneginf(m_new), 0, m_new)  # rows with nothing yet
                p = np.exp(s - shift[..., None])
                fade = np.exp(m - shift)
                denom = denom * fade + p.sum(axis=-1)
                if self.p > 0:
                    p *= self._keep(i0, j0, p.shape)
                acc = acc * fade[..., None] + p @ v[..., j0:j1, :].astype(work, copy=False)
                m = m_new
            empty = denom == 0  # fully masked rows: zeros, as the math path's safe softmax
            out[..., i0:i1, :] = acc / np.where(empty, 1, denom)[..., None]
            lse[..., i0:i1] = np.where(empty, -np.inf, m + np.log(np.where(empty, 1, denom)))
        self.logsumexp = lse
        return out.astype(q.dtype, copy=False)

    def _key_blocks(self, i0: int, i1: int, S: int):
        """(j0, j1) of the key blocks row block [i0, i1) may see (causal: up to its end)."""
        end = min(S, i1) if self.is_causal else S
        for j0 in range(0, end, BLOCK):
            yield j0, min(j0 + BLOCK, end)

    def _scores(self, qb, k, mask, scale, i0, i1, j0, j1, work):
        s = qb @ np.swapaxes(k[..., j0:j1, :].astype(work, copy=False), -1, -2)
        s *= scale
        if self.is_causal and j1 > i0 + 1:  # a block crossing the diagonal
            rows = np.arange(i0, i1)[:, None]
            s[..., np.arange(j0, j1)[None, :] > rows] = -np.inf
        elif mask is not None:
            mb = mask[..., i0:i1, j0:j1]
            if mb.dtype == np.bool_:
                s = np.where(mb, s, -np.inf)
            else:
                s += mb
        return s

    def _keep(self, i0: int, j0: int, shape) -> np.ndarray:
        """The dropout mask of block (i0, j0), scaled: the same draw in forward and backward."""
        rng = np.random.default_rng([self.seed, i0, j0])
        keep = rng.random(shape, dtype=np.float32) >= self.p
        return keep * np.float32(1.0 / (1.0 - self.p) if self.p < 1 else 0.0)

    def backward(self, g):
        saved = list(self.saved_tensors)
        if _create_graph():  # grad of grad: the math path's ops, probabilities recomputed
            if self.p > 0:
                raise GraphError(
                    f"{self.name}: no double backward through the flash kernel with dropout",
                    op=self.name, hint="run this attention under "
                    "sf.nn.attention.sdpa_kernel(SDPBackend.MATH)")
            return self._math_backward(saved[:-2] + [None], g)
        qt, kt, vt = saved[0], saved[1], saved[2]
        need = [n is not None for n in self.next[0::3]]
        if qt.data is None:  # meta: the gradients' shapes, nothing to compute
            return tuple(Tensor._make(None, t.shape, t.dtype, t.device) if n else None
                         for t, n in zip((qt, kt, vt), need)) + (
                             (None,) if self.mask_kind else ())
        mask = saved[3].data if self.mask_kind else None
        out, lse = saved[-2].data, saved[-1].data
        work = np.dtype(_compute_np(qt.dtype))
        q, k, v, mask = _broadcast(qt.data, kt.data, vt.data, mask)
        do = np.broadcast_to(g.data, out.shape).astype(work, copy=False)
        L, S = q.shape[-2], k.shape[-2]
        scale = work.type(self.scale if self.scale is not None else q.shape[-1] ** -0.5)
        dq = np.zeros(q.shape, work)
        dk = np.zeros(k.shape, work)
        dv = np.zeros(v.shape, work)
        delta = (do * out).sum(axis=-1)  # rowsum(dO * O) = rowsum(P * dP)
        for i0 in range(0, L, BLOCK):
            i1 = min(i0 + BLOCK, L)
            qb = q[..., i0:i1, :].astype(work, copy=False)
            dob = do[..., i0:i1, :]
            shift = np.where(np.isneginf(lse[..., i0:i1]), np.inf, lse[..., i0:i1])[..., None]
            for j0, j1 in self._key_blocks(i0, i1, S):
                s = self._scores(qb, k, mask, scale, i0, i1, j0, j1, work)
                p = np.exp(s - shift)  # this block's probabilities, from the logsumexp
                vb = v[..., j0:j1, :].astype(work, copy=False)
                dp = dob @ np.swapaxes(vb, -1, -2)
                if self.p > 0:
                    keep = self._keep(i0, j0, p.shape)
                    dv[..., j0:j1, :] += np.swapaxes(p * keep, -1, -2) @ dob
                    dp *= keep
                else:
                    dv[..., j0:j1, :] += np.swapaxes(p, -1, -2) @ dob
                ds = p * (dp - delta[..., i0:i1, None])
                ds *= scale
                dq[..., i0:i1, :] += ds @ k[..., j0:j1, :].astype(work, copy=False)
                dk[..., j0:j1, :] += np.swapaxes(ds, -1, -2) @ qb
        grads = [_grad_as(a, t) if n else None for a, t, n in zip((dq, dk, dv), (qt, kt, vt),
                                                                   need)]
        return tuple(grads) + ((None,) if self.mask_kind else ())


def _broadcast(q, k, v, mask):
    """q, k, v (and mask) with their batch dims broadcast to one shape (views)."""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q = np.broadcast_to(q, batch + q.shape[-2:])
    k = np.broadcast_to(k, batch + k.shape[-2:])
    v = np.broadcast_to(v, batch + v.shape[-2:])
    if mask is not None:
        mask = np.broadcast_to(mask, batch + (q.shape[-2], k.shape[-2]))
    return q, k, v, mask


def _grad_as(grad: np.ndarray, like):
    """The gradient as a tensor in `like`'s dtype (the engine sums broadcast batch dims)."""
    data = grad.astype(like.dtype.np, copy=False)
    return Tensor._make(data, data.shape, like.dtype, like.device)


class SDPBackend(enum.IntEnum):
    """The attention kernels (PyTorch's names); the cpu runs MATH and FLASH_ATTENTION."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_BY_NAME = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
            "flash_attention": SDPBackend.FLASH_ATTENTION}
_RUNS_HERE = (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH)


class _Allowed(threading.local):
    def __init__(self) -> None:  # every thread starts with both, flash preferred
        self.backends: tuple = _RUNS_HERE


allowed = _Allowed()


def as_backends(backends) -> tuple:
    """SDPBackend values from one or a list of SDPBackend or 'flash' / 'math'."""
    if isinstance(backends, (str, SDPBackend)):
        backends = [backends]
    out = []
    for b in backends:
        if isinstance(b, str):
            if b.lower() not in _BY_NAME:
                raise ValueError(f"sdpa_kernel: unknown kernel {b!r}; use 'flash' or 'math' "
                                 "(or SDPBackend.FLASH_ATTENTION / SDPBackend.MATH)")
            b = _BY_NAME[b.lower()]
        out.append(SDPBackend(b))
    return tuple(out)


def choose(mask, dropout_p: float) -> type[Attention]:
    """The kernel class that runs: flash where allowed and it can, else math."""
    flash_ok = mask is None or not mask.requires_grad  # no gradient for the mask in flash
    for b in allowed.backends:
        if b is SDPBackend.FLASH_ATTENTION and flash_ok:
            return FlashAttention
        if b is SDPBackend.MATH:
            return Attention
    raise ValueError(
        "scaled_dot_product_attention: no allowed kernel can run these inputs (allowed: "
        f"{', '.join(b.name for b in allowed.backends) or 'none'}; flash has no gradient for "
        "attn_mask)")
