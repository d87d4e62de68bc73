"""scaled_dot_product_attention as one primitive (scores, mask, softmax, dropout, @ v)."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...random import get_rng
from ...shape import broadcast_shapes, dims_equal, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from .. import meta_layout
from ..base import ATTENTION, DROPOUT_MASK, LAYER_INPUT, Op, Saved, apply
from ..elementwise import where
from ..registry import public
from ._common import _as_rows, _create_graph, _dense, _need_float
from .dropout import _mask_scale
from .softmax import SoftmaxBackward, softmax


class Attention(Op):
    """softmax(q @ k^T * scale + mask) @ v, with dropout on the probabilities.

    Saves q, k, v, the probabilities and, with dropout, its bool mask and the dropped
    probabilities (the PV matmul's input): what Korthikanti et al. count for attention.
    """

    name = "scaled_dot_product_attention"

    def __init__(self, scale, is_causal: bool, dropout_p: float, mask_kind, generator) -> None:
        self.scale, self.is_causal, self.p = scale, is_causal, dropout_p
        self.mask_kind, self.generator = mask_kind, generator

    def infer(self, q, k, v, *mask):
        op = self.name
        ops = [("q", describe(q)), ("k", describe(k)), ("v", describe(v))]
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.ndim < 2:
                raise ShapeRuntimeError(f"{op}: {name} must have at least 2 dims [..., L, E], got "
                                        f"{format_shape(t.shape)}", op=op, operands=ops)
            _need_float(op, t, name)
        if not (q.dtype is k.dtype is v.dtype):
            raise DTypeError(f"{op}: q, k, v have different dtypes ({q.dtype}, {k.dtype}, "
                             f"{v.dtype})", op=op, operands=ops, hint="cast them to one dtype")
        L, E = q.shape[-2], q.shape[-1]
        S, Ek = k.shape[-2], k.shape[-1]
        if not dims_equal(E, Ek):
            hint = None
            if dims_equal(S, E):
                hint = (f"k looks transposed ([..., E, S] = {format_shape(k.shape)}): pass k "
                        "as [..., S, E]; attention transposes it itself")
            elif dims_equal(L, Ek):
                hint = (f"q looks transposed ([..., E, L] = {format_shape(q.shape)}): use "
                        "q.transpose(-2, -1)")
            raise ShapeRuntimeError(f"{op}: q's last dim ({E}) != k's last dim ({Ek})", op=op,
                                    operands=ops, hint=hint)
        if not dims_equal(v.shape[-2], S):
            hint = None
            if dims_equal(v.shape[-1], S):
                hint = (f"v looks transposed ([..., Ev, S] = {format_shape(v.shape)}): pass v "
                        "as [..., S, Ev]")
            raise ShapeRuntimeError(f"{op}: k has {S} positions (dim -2) but v has {v.shape[-2]}",
                                    op=op, operands=ops, hint=hint)
        batch = broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]), op, ("q", "k"))
        self.scores_shape = tuple(batch) + (L, S)
        out_batch = broadcast_shapes(tuple(batch), tuple(v.shape[:-2]), op, ("q", "v"))
        if mask:
            m = mask[0]
            if m.dtype.is_integer:
                raise DTypeError(f"{op}: attn_mask must be bool (True = attend) or float "
                                 f"(added to the scores), got {m.dtype}", op=op,
                                 operands=ops + [("attn_mask", describe(m))],
                                 hint="use mask.bool()")
            if m.dtype.is_floating_point and m.dtype is not q.dtype:
                raise DTypeError(f"{op}: a float attn_mask must have q's dtype {q.dtype}, got "
                                 f"{m.dtype}", op=op, operands=ops + [("attn_mask",
                                                                       describe(m))])
            full = broadcast_shapes(tuple(m.shape), self.scores_shape, op,
                                    ("attn_mask", "scores"))
            if tuple(full) != self.scores_shape:
                raise ShapeRuntimeError(
                    f"{op}: attn_mask {format_shape(m.shape)} does not broadcast to the "
                    f"scores {format_shape(self.scores_shape)} ([..., L, S])", op=op,
                    operands=ops + [("attn_mask", describe(m))])
        if self.scale is None:
            self.scale = 1.0 / math.sqrt(E) if type(E) is int else None
        self.need_mask_grad = bool(mask) and mask[0].requires_grad
        return tuple(out_batch) + (L, v.shape[-1]), q.dtype

    def saved(self, q, k, v, *mask, out):
        kept = (Saved.input(0, LAYER_INPUT), Saved.input(1, LAYER_INPUT),
                Saved.input(2, LAYER_INPUT))
        if mask:
            kept += (Saved.input(3),)
        kept += (Saved.new("probs", self.scores_shape, q.dtype, ATTENTION),)
        if self.p > 0:
            kept += (Saved.new("keep", self.scores_shape, _dt.bool_, DROPOUT_MASK),
                     Saved.new("dropped", self.scores_shape, q.dtype, ATTENTION))
        return kept

    def forward(self, q, k, v, mask=None):
        kern = self.device.kernels
        xp = kern.xp
        s = kern.bmm(q, xp.swapaxes(k, -1, -2))
        L, S = s.shape[-2:]
        if mask is None:  # scale, causal mask and softmax in one pass (compiled on the cpu)
            if s.size:
                kern.softmax_rows(_as_rows(s, S), self.scale, L if self.is_causal else 0, True)
        else:
            s *= s.dtype.type(self.scale)  # scale the scores in place: no scaled copy of q
            if mask.dtype == _dt.bool_.np:
                xp.copyto(s, -math.inf, where=~mask)
            else:
                s += mask
            if s.size:
                kern.softmax_blocked(_as_rows(s, S), _as_rows(s, S), False, zero_empty=True)
        self.probs = s
        if self.p > 0:
            f32 = _dt.float32.np
            r = self.device.from_numpy(get_rng(self.generator).random(s.shape, dtype=f32))
            keep = r >= self.p
            pd = xp.multiply(s, keep, out=r if s.dtype == f32 else None)
            pd *= pd.dtype.type(1.0 / (1.0 - self.p) if self.p < 1 else 0.0)
            self.keep, self.dropped = keep, pd
            return kern.bmm(pd, v)
        return kern.bmm(s, v)

    def backward(self, g):
        return self._math_backward(list(self.saved_tensors), g)

    def _math_backward(self, saved: list, g):
        """Gradients from q, k, v (mask) and the probabilities (saved[-1]; recomputed from
        q and k under create_graph, so grad of grad is a graph of ops)."""
        q, k, v = saved[0], saved[1], saved[2]
        mask = saved[3] if self.mask_kind else None
        keep = saved[-2] if self.p > 0 else None
        p = saved[-3] if self.p > 0 else saved[-1]
        scale = self.scale if self.scale is not None else q.shape[-1] ** -0.5
        ks = 1.0 / (1.0 - self.p) if self.p < 1 else 0.0
        need = [n is not None for n in self.next[0::3]]
        create = _create_graph()
        g = _dense(g)
        if create:
            s = (q @ k.mT) * scale
            if self.is_causal:
                s = where(_causal_keep(s), s, float("-inf"))
            elif mask is not None:
                s = where(mask, s, float("-inf")) if mask.dtype is _dt.bool_ else s + mask
            p = softmax(s, -1)
        if keep is None:
            pd = p
        else:  # the dropped probabilities as saved, or as a function of p for grad of grad
            pd = _mask_scale(p, keep, ks) if create else saved[-1]
        dv = pd.mT @ g if need[2] else None
        dq = dk = dm = None
        if need[0] or need[1] or (len(need) > 3 and need[3]):
            dpd = g @ v.mT
            if create:
                dp = dpd * keep * ks if keep is not None else dpd
                ds_raw = p * (dp - (dp * p).sum(-1, keepdim=True))
                ds = ds_raw * scale
            else:
                ds = apply(SoftmaxBackward(p.ndim - 1, scale * (ks if keep is not None else 1)),
                           p, dpd, *((keep,) if keep is not None else ()))
                ds_raw = ds * (1.0 / scale) if self.need_mask_grad else None
            if need[0]:
                dq = ds @ k
            if need[1]:
                dk = ds.mT @ q
            if self.need_mask_grad:
                dm = ds_raw
        return (dq, dk, dv) + ((dm,) if self.mask_kind else ())


def _causal_keep(s: Tensor) -> Tensor:
    """The [L, S] bool mask of positions a causal query may see (top-left aligned)."""
    L, S = s.shape[-2:]
    xp = s.device.xp
    return Tensor._make(xp.tril(xp.ones((L, S), bool)), (L, S), _dt.bool_, s.device)


@public(sf=False, functional=True)
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False,
                                 generator=None) -> Tensor:
    """softmax(q @ k^T * scale + mask) @ v (PyTorch semantics; bool mask: True = attend)."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        query, key, value, attn_mask = _autocast.lower(query, key, value, attn_mask)
    if enable_gqa:
        key, value = _gqa_heads(query, key), _gqa_heads(query, value)
    if is_causal and attn_mask is not None:
        raise ShapeError("scaled_dot_product_attention: pass either attn_mask or "
                         "is_causal=True, not both")
    if not 0.0 <= dropout_p <= 1.0:
        raise ShapeError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got "
                         f"{dropout_p}")
    from .flash_attention import choose

    kernel = choose(attn_mask, dropout_p)
    op = kernel(scale, is_causal, float(dropout_p), None if attn_mask is None else
                   ("bool" if attn_mask.dtype is _dt.bool_ else "float"), generator)
    extra = (attn_mask,) if attn_mask is not None else ()
    out = apply(op, query, key, value, *extra)
    if out._data is None and kernel is not Attention and out.ndim >= 3:
        meta_layout.swapped(out, -3, -2)  # flash writes [..., L, H, E], as on the cpu
    return out


def _gqa_heads(q: Tensor, t: Tensor) -> Tensor:
    """Grouped-query attention: each of t's heads (dim -3) serves Hq // Hkv query heads, so
    t's heads are repeated in place (repeat_interleave), as PyTorch's enable_gqa does."""
    if q.ndim < 3 or t.ndim < 3:
        return t
    hq, hk = q.shape[-3], t.shape[-3]
    if dims_equal(hq, hk):
        return t
    if type(hq) is not int or type(hk) is not int or hk == 0 or hq % hk:
        raise ShapeRuntimeError(
            f"scaled_dot_product_attention: with enable_gqa the number of query heads ({hq}) "
            f"must be a multiple of the key/value heads ({hk})",
            op="scaled_dot_product_attention",
            operands=[("q", describe(q)), ("k/v", describe(t))])
    n = hq // hk
    lead, (S, E) = tuple(t.shape[:-3]), tuple(t.shape[-2:])
    return t.unsqueeze(-3).expand(*lead, hk, n, S, E).reshape(*lead, hk * n, S, E)
