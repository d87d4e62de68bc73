"""Blockwise ("flash") scaled-dot-product attention: O(L) saved, not O(L * S).

Forward walks blocks of 128 queries; each sees its keys in panels of up to 512 (causal
blocks stop at the diagonal). With one panel (S <= 512) the block's softmax and its row
logsumexp come out of one kernel (`flash_softmax_lse`: compiled on the cpu); with more, an online
softmax (a running max and sum per row) rescales what earlier panels added. So the [L, S]
probabilities never exist at once; it saves q, k, v, the output and the row logsumexp
[..., L] (float32), as PyTorch's CPU flash kernel does. Backward recomputes each block's
probabilities from the logsumexp and dS = P * (dP - rowsum(dO * O)) in one pass. Dropout
masks are drawn per 128 x 128 tile from a seed saved with the op (a few bytes), so backward
draws the same ones instead of keeping them. float16/bfloat16 run in float32 blocks.
"""

from __future__ import annotations

import enum
import math
import threading

from ... import dtypes as _dt
from ...errors import GraphError
from ...random import get_rng
from ...tensor import Tensor
from ..base import ATTENTION_OUTPUT, LAYER_INPUT, Saved
from ._common import _create_graph
from .attention import Attention

QBLOCK = 128  # queries per block
KBLOCK = 512  # keys per panel: up to 512 keys a block's softmax is one pass, no rescaling
GROUP_BYTES = 1 << 21  # backward's working arrays per batch group: bounded scratch
TILE = 128  # dropout masks are drawn per 128 x 128 tile, seeded by its corner


class FlashAttention(Attention):
    """softmax(q @ k^T * scale + mask) @ v in blocks; saves out and logsumexp, not P.

    The output is laid out [..., L, H, Ev] and returned as its [..., H, L, Ev] view, as
    PyTorch's CPU kernel does, so the usual merge of heads (transpose(1, 2).reshape) is a
    view, not a copy; the gradients of q, k and v are laid out the same way.
    """

    def saved(self, q, k, v, *mask, out):
        kept = (Saved.input(0, LAYER_INPUT), Saved.input(1, LAYER_INPUT),
                Saved.input(2, LAYER_INPUT))
        if mask:
            kept += (Saved.input(3),)
        lse = _dt.float64 if q.dtype is _dt.float64 else _dt.float32
        return kept + (Saved.output(ATTENTION_OUTPUT),
                       Saved.new("logsumexp", self.scores_shape[:-1], lse, ATTENTION_OUTPUT))

    def forward(self, q, k, v, mask=None):
        kern = self.device.kernels
        xp = kern.xp
        work = _work(q.dtype)
        q, k, v, mask = _broadcast(xp, q, k, v, mask)
        # 16-bit: each block is computed in float32 and rounded into the output, so no
        # whole float32 output exists next to it
        out = heads_last(xp, q.shape[:-1] + (v.shape[-1],), q.dtype)
        lse = xp.empty(q.shape[:-1], work)
        self.seed = int(get_rng(self.generator).integers(2**62)) if self.p > 0 else None
        for g, g0 in _groups(q.shape, k.shape[-2], v.shape[-1], work, work != q.dtype,
                             self.p):
            self._forward_group(kern, q[g], k[g], v[g], None if mask is None else mask[g],
                                out[g], lse[g], g0, work)
        self.logsumexp = lse
        return out

    def _forward_group(self, kern, q, k, v, mask, out, lse, g0: int, work) -> None:
        """out and lse of one group of the batch, block by block."""
        xp = kern.xp
        L, S = q.shape[-2], k.shape[-2]
        k_t = _transposed(kern, k, work)
        for i0 in range(0, L, QBLOCK):
            i1 = min(i0 + QBLOCK, L)
            qb = _as(kern, q[..., i0:i1, :], work)
            panels = self._panels(i0, i1, S)
            if not panels:  # no keys at all: zeros, as the math path's safe softmax gives
                out[..., i0:i1, :] = 0
                lse[..., i0:i1] = -math.inf
                continue
            if len(panels) == 1:  # one pass: the softmax kernel gives P and the logsumexp
                j0, j1 = panels[0]
                s, sc, causal = self._scores(xp, qb, k_t, mask, i0, i1, j0, j1, work)
                lse[..., i0:i1] = kern.flash_softmax_lse(s, sc, causal)
                if self.p > 0:
                    s *= self._keep_panel(kern, g0, i0, i1, j0, j1, s.shape[:-2])
                _mm(kern, s, _as(kern, v[..., j0:j1, :], work), out[..., i0:i1, :], False)
                continue
            m = xp.empty(qb.shape[:-1], lse.dtype)  # running row max
            denom = xp.empty(qb.shape[:-1], lse.dtype)  # running row sum of exp
            acc = None
            for j0, j1 in panels:  # online softmax: rescale what earlier panels added
                s, sc, causal = self._scores(xp, qb, k_t, mask, i0, i1, j0, j1, work)
                fade = kern.flash_online(s, m, denom, sc, causal, acc is None)
                if self.p > 0:
                    s *= self._keep_panel(kern, g0, i0, i1, j0, j1, s.shape[:-2])
                pv = s @ _as(kern, v[..., j0:j1, :], work)
                if acc is None:
                    acc = pv
                else:
                    acc *= fade[..., None]
                    acc += pv
            empty = denom == 0  # fully masked rows: zeros, as the math path's safe softmax
            safe = xp.where(empty, 1, denom)
            if out.dtype == work:
                xp.divide(acc, safe[..., None], out=out[..., i0:i1, :])
            else:
                _put(kern, out[..., i0:i1, :], xp.divide(acc, safe[..., None], out=acc))
            lse[..., i0:i1] = xp.where(empty, -math.inf, m + xp.log(safe))

    def _panels(self, i0: int, i1: int, S: int) -> list:
        """(j0, j1) of the key panels row block [i0, i1) may see (causal: up to its end)."""
        end = min(S, i1) if self.is_causal else S
        return [(j0, min(j0 + KBLOCK, end)) for j0 in range(0, end, KBLOCK)]

    def _scores(self, xp, qb, k_t, mask, i0, i1, j0, j1, work):
        """(scores, the scale still to apply, causal offset or None) of one block; k_t is
        k^T [..., E, S]."""
        s = qb @ k_t[..., j0:j1]
        scale = self.scale if self.scale is not None else qb.shape[-1] ** -0.5
        if self.is_causal:
            return s, scale, (i0 - j0 if j1 > i0 + 1 else None)  # None: fully visible
        if mask is None:
            return s, scale, None
        s *= work.type(scale)
        mb = mask[..., i0:i1, j0:j1]
        if mb.dtype == _dt.bool_.np:
            xp.copyto(s, -math.inf, where=~mb)
        else:
            s += mb
        return s, 1.0, None

    def _keep(self, g0: int, i0: int, j0: int, shape):
        """The dropout mask of tile (i0, j0) of the batch group from g0, scaled: the same
        draw in forward and backward."""
        return self.device.kernels.flash_dropout_keep(self.seed, g0, i0, j0, shape, self.p)

    def _keep_panel(self, kern, g0: int, i0: int, i1: int, j0: int, j1: int, batch: tuple):
        """The dropout mask of queries [i0, i1) x keys [j0, j1), from its 128 x 128 tiles."""
        tiles = [self._keep(g0, i0, t0, batch + (i1 - i0, min(t0 + TILE, j1) - t0))
                 for t0 in range(j0, j1, TILE)]
        return tiles[0] if len(tiles) == 1 else kern.xp.concatenate(tiles, axis=-1)

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
        if qt._data is None:  # meta: the gradients' shapes, nothing to compute
            return tuple(Tensor._make(None, t.shape, t.dtype, t.device) if n else None
                         for t, n in zip((qt, kt, vt), need)) + (
                             (None,) if self.mask_kind else ())
        kern = qt.device.kernels
        xp = kern.xp
        mask = saved[3]._data if self.mask_kind else None
        out, lse = saved[-2]._data, saved[-1]._data
        work = _work(qt.dtype.np)
        store = qt.dtype.np  # the gradients' dtype; 16-bit ones run in float32
        q, k, v, mask = _broadcast(xp, qt._data, kt._data, vt._data, mask)
        do = xp.broadcast_to(g._data, out.shape)
        # one query block writes every gradient once (no zeros to add into); more add up.
        # dq is finished block by block, and so are dk and dv when written once: 16-bit
        # gradients are then rounded from float32 blocks, never whole float32 arrays
        once = q.shape[-2] <= QBLOCK
        dq = heads_last(xp, q.shape, store)
        dk, dv = (heads_last(xp, t.shape, store if once else work, zero=not once)
                  for t in (k, v))
        for b, g0 in _groups(q.shape, k.shape[-2], v.shape[-1], work, work != store, self.p):
            self._backward_group(kern, q[b], k[b], v[b], None if mask is None else mask[b],
                                 do[b], out[b], lse[b], (dq[b], dk[b], dv[b]), g0, work)
        grads = [_grad_as(kern, a, t) if n else None for a, t, n in zip((dq, dk, dv), (qt, kt, vt),
                                                                   need)]
        return tuple(grads) + ((None,) if self.mask_kind else ())


    def _backward_group(self, kern, q, k, v, mask, do, out, lse, grads, g0: int, work
                        ) -> None:
        """dq, dk and dv (`grads`, written in place) of one group of the batch."""
        xp = kern.xp
        dq, dk, dv = grads
        L, S = q.shape[-2], k.shape[-2]
        once = L <= QBLOCK
        k_t, v_t = _transposed(kern, k, work), _transposed(kern, v, work)
        scale = self.scale if self.scale is not None else q.shape[-1] ** -0.5
        for i0 in range(0, L, QBLOCK):
            i1 = min(i0 + QBLOCK, L)
            qb = _as(kern, q[..., i0:i1, :], work)
            dob = _as(kern, do[..., i0:i1, :], work)
            lse_b = xp.ascontiguousarray(lse[..., i0:i1])
            # rowsum(dO * O) = rowsum(P * dP): one [..., rows] vector instead of P, C-ordered
            # for the compiled kernel (from heads-last inputs einsum returns a strided one)
            delta_b = xp.ascontiguousarray(xp.einsum(
                "...i,...i->...", dob, _as(kern, out[..., i0:i1, :], work), dtype=lse.dtype))
            dq_b = dq[..., i0:i1, :] if dq.dtype == work else xp.empty(qb.shape, work)
            panels = self._panels(i0, i1, S)
            if not panels:  # no keys: nothing flows back
                dq_b[...] = 0
            for n, (j0, j1) in enumerate(panels):
                s, sc, causal = self._scores(xp, qb, k_t, mask, i0, i1, j0, j1, work)
                kb = _as(kern, k[..., j0:j1, :], work)
                dp = dob @ v_t[..., j0:j1]
                keep = (self._keep_panel(kern, g0, i0, i1, j0, j1, s.shape[:-2]) if self.p
                        else None)
                if keep is not None:
                    dp *= keep
                kern.flash_grad(s, dp, lse_b, delta_b, sc, scale, causal)  # s: P, dp: dS
                if keep is not None:
                    s *= keep
                _mm(kern, xp.swapaxes(s, -1, -2), dob, dv[..., j0:j1, :], add=not once)
                _mm(kern, dp, kb, dq_b, add=n > 0)
                _mm(kern, xp.swapaxes(dp, -1, -2), qb, dk[..., j0:j1, :], add=not once)
            if dq.dtype != work:
                _put(kern, dq[..., i0:i1, :], dq_b)
            if once:  # keys no query saw (causal, S > L): zero gradients
                seen = panels[-1][1] if panels else 0
                dk[..., seen:, :] = 0
                dv[..., seen:, :] = 0


def _work(dtype):
    """The dtype blocks are computed in: float64 stays, others (16-bit too) run float32."""
    return _dt.float64.np if dtype == _dt.float64.np else _dt.float32.np


def _groups(shape: tuple, S: int, Ev: int, work, half: bool, p: float) -> list:
    """(index, first row) of groups along the first batch dim whose blocks' working arrays
    take at most GROUP_BYTES: the scratch stays bounded (and near L2) at any batch size."""
    if len(shape) < 3:
        return [((), 0)]
    step = max(1, GROUP_BYTES // max(_row_scratch(shape, S, Ev, work, half, p), 1))
    return [(slice(b, b + step), b) for b in range(0, shape[0], step)]


def _row_scratch(shape: tuple, S: int, Ev: int, work, half: bool, p: float) -> int:
    """Bytes backward works in per row of the first batch dim (shape: q's): k^T and v^T, a
    block's scores and dS (and dropout's draw and mask), one product; 16-bit inputs add
    their float32 blocks (q, dO, O, dq, k)."""
    L, E = shape[-2:]
    r, c = min(L, QBLOCK), min(S, KBLOCK)
    heads = math.prod(shape[1:-2])
    floats = S * (E + Ev) + (4 if p else 2) * r * c + c * max(E, Ev)
    if half:
        floats += 2 * r * E + 2 * r * Ev + c * E
    return heads * floats * work.itemsize


def _mm(kern, a, b, dst, add: bool) -> None:
    """dst = a @ b, or dst += a @ b; a 16-bit dst gets the float32 product rounded once."""
    if add:
        dst += a @ b
    elif dst.dtype != a.dtype:
        _put(kern, dst, a @ b)
    else:
        kern.xp.matmul(a, b, out=dst)


def _put(kern, dst, block) -> None:
    """Round a float32 block into its place in a 16-bit array (nearest even)."""
    dst[...] = kern.attention_narrow(block, dst.dtype)


def heads_last(xp, shape: tuple, dtype, zero: bool = False):
    """An array of `shape` [..., H, L, E] laid out [..., L, H, E] (a transposed view), as
    PyTorch's CPU flash kernel lays out its output; plain C order below 3 dims."""
    make = xp.zeros if zero else xp.empty
    if len(shape) < 3:
        return make(shape, dtype)
    return xp.swapaxes(make(shape[:-3] + (shape[-2], shape[-3], shape[-1]), dtype), -3, -2)


def _transposed(kern, k, work):
    """k^T [..., E, S] in C order: NumPy's batched matmul with a transposed view as the right
    operand runs ~1.7x slower than with this copy (measured: 64 heads of 64 x 32)."""
    return _as(kern, kern.xp.swapaxes(k, -1, -2), work, contiguous=True)


def _as(kern, x, work, contiguous: bool = False):
    """x in the work dtype: 16-bit blocks widened by the table (bfloat16 in compiled passes
    on the cpu, where NumPy's cast goes through ml_dtypes one element at a time)."""
    if x.dtype == work:
        return kern.xp.ascontiguousarray(x) if contiguous else x
    return kern.attention_widen(x, work)


def _broadcast(xp, q, k, v, mask):
    """q, k, v (and mask) with their batch dims broadcast to one shape (views)."""
    batch = tuple(xp.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
    q = xp.broadcast_to(q, batch + q.shape[-2:])
    k = xp.broadcast_to(k, batch + k.shape[-2:])
    v = xp.broadcast_to(v, batch + v.shape[-2:])
    if mask is not None:
        mask = xp.broadcast_to(mask, batch + (q.shape[-2], k.shape[-2]))
    return q, k, v, mask


def _grad_as(kern, grad, like):
    """The gradient as a tensor in `like`'s dtype (the engine sums broadcast batch dims)."""
    xp = kern.xp
    dt = like.dtype.np
    data = grad
    if grad.dtype != dt:  # float32 sums of 16-bit gradients: rounded, keeping the layout
        if grad.ndim >= 3 and xp.swapaxes(grad, -3, -2).flags.c_contiguous:
            data = xp.swapaxes(kern.attention_narrow(xp.swapaxes(grad, -3, -2), dt), -3, -2)
        else:
            data = kern.attention_narrow(xp.ascontiguousarray(grad), dt)
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
