"""MultiheadAttention, with PyTorch's parameters (in_proj_weight, in_proj_bias, out_proj);
and `sdpa_kernel`, which picks the attention kernel (as `torch.nn.attention`)."""

from __future__ import annotations

import contextlib
import math

import numpy as np

from .. import dtypes as _dt
from ..errors import DTypeError, ShapeError
from ..factories import empty, full, zeros
from ..ops.base import Op, apply
from ..ops.elementwise import where
from ..ops.movement import View, _view_apply
from ..ops.nn.flash_attention import SDPBackend, allowed, as_backends
from ..tensor import describe
from . import functional as F
from . import init
from .linear import NonDynamicallyQuantizableLinear
from .module import Module
from .parameter import Parameter


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Inside, scaled_dot_product_attention runs only `backends` ('flash', 'math' or
    SDPBackend values; with set_priority, tried in the order given)."""
    chosen = as_backends(backends)
    if not set_priority:  # PyTorch's own order: flash before math
        chosen = tuple(b for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH) if b in chosen)
    old, allowed.backends = allowed.backends, chosen
    try:
        yield
    finally:
        allowed.backends = old


def _float_mask(mask, dtype, name: str):
    """A bool mask (True = masked out) as an additive float mask; a float mask as it is."""
    if mask is None:
        return None
    if mask.dtype is _dt.bool_:
        return where(mask, full((), -math.inf, dtype=dtype, device=mask.device),
                     zeros((), dtype=dtype, device=mask.device))
    if not mask.dtype.is_floating_point:
        raise DTypeError(f"MultiheadAttention: only bool and floating-point {name}s are "
                         f"supported, got {mask.dtype}", op="multi_head_attention",
                         operands=[(name, describe(mask))])
    return mask


class _Rows(View):
    """x[start:stop] along dim 0: a view (shares x's memory and version counter).

    Private to MultiheadAttention, which slices q, k, v out of in_proj_weight; it can become
    `x[start:stop]` once Tensor has indexing.
    """

    name = "rows"

    def __init__(self, start: int, stop: int) -> None:
        self.start, self.stop = start, stop

    def infer(self, x):
        self.n = x.shape[0]
        return (self.stop - self.start, *x.shape[1:]), x.dtype

    def forward(self, x):
        return x[self.start:self.stop]

    def backward(self, g):
        return (apply(_PadRows(self.start, self.n), g),)


class _PadRows(Op):
    """The gradient of _Rows: g placed at rows [start, start + len(g)) of n zero rows."""

    name = "pad_rows"

    def __init__(self, start: int, n: int) -> None:
        self.start, self.n = start, n

    def infer(self, g):
        self.rows = g.shape[0]
        return (self.n, *g.shape[1:]), g.dtype

    def forward(self, g):
        out = np.zeros((self.n, *g.shape[1:]), dtype=g.dtype)
        out[self.start:self.start + g.shape[0]] = g
        return out

    def backward(self, grad):
        return (_view_apply(_Rows(self.start, self.start + self.rows), grad),)


def _rows(t, i: int, n: int):
    """Rows [i*n, (i+1)*n) of a weight or bias (q, k or v of the packed projection)."""
    return None if t is None else _view_apply(_Rows(i * n, (i + 1) * n), t)


class MultiheadAttention(Module):
    """softmax(Q K^T / sqrt(d) + mask) V over num_heads heads, then an output projection.

    Inputs are [L, N, E] (or [N, L, E] with batch_first, or unbatched [L, E]);
    forward returns (output, attention weights or None).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ShapeError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not "
                                      "supported")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ShapeError("embed_dim must be divisible by num_heads")
        kw = {"device": device, "dtype": dtype}
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty((3 * embed_dim,), **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _check(self, query, key, value, key_padding_mask, attn_mask) -> None:
        def fail(msg, hint=None):
            ops = [("query", describe(query)), ("key", describe(key)), ("value", describe(value))]
            if key_padding_mask is not None:
                ops.append(("key_padding_mask", describe(key_padding_mask)))
            if attn_mask is not None:
                ops.append(("attn_mask", describe(attn_mask)))
            return ShapeError(f"MultiheadAttention: {msg}", op="multi_head_attention",
                              operands=ops, hint=hint)

        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise fail("query, key and value must all be 3-D (batched) or all 2-D (unbatched)")
        if query.shape[-1] != self.embed_dim:
            raise fail(f"query's last dim must be embed_dim={self.embed_dim}")
        if key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise fail(f"key's last dim must be kdim={self.kdim} and value's vdim={self.vdim}")
        if tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
            raise fail("key and value must have the same sequence length and batch size")
        if query.ndim == 3:
            b = 0 if self.batch_first else 1
            if query.shape[b] != key.shape[b]:
                raise fail("query and key must have the same batch size",
                           hint="batch_first=True expects [N, L, E]; the default is [L, N, E]")

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        self._check(query, key, value, key_padding_mask, attn_mask)
        batched = query.ndim == 3
        if batched and self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        tgt_len, bsz, embed_dim = query.shape
        src_len = key.shape[0]
        H, hd = self.num_heads, self.head_dim

        key_padding_mask = _float_mask(key_padding_mask, query.dtype, "key_padding_mask")
        if is_causal and attn_mask is None:
            raise ShapeError("MultiheadAttention: is_causal is a hint and needs attn_mask too "
                             "(pass the causal mask as attn_mask)")
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask = None  # scaled_dot_product_attention builds the causal mask itself
        else:
            attn_mask = _float_mask(attn_mask, query.dtype, "attn_mask")
            if key_padding_mask is not None:
                is_causal = False
        if attn_mask is not None:
            if attn_mask.ndim == 2:
                if tuple(attn_mask.shape) != (tgt_len, src_len):
                    raise ShapeError(
                        f"MultiheadAttention: a 2-D attn_mask must be [{tgt_len}, {src_len}] "
                        "(target length, source length)", op="multi_head_attention",
                        operands=[("attn_mask", describe(attn_mask))])
                attn_mask = attn_mask.unsqueeze(0)
            elif attn_mask.ndim == 3:
                if tuple(attn_mask.shape) != (bsz * H, tgt_len, src_len):
                    raise ShapeError(
                        f"MultiheadAttention: a 3-D attn_mask must be [{bsz * H}, {tgt_len}, "
                        f"{src_len}] (batch * num_heads, target length, source length)",
                        op="multi_head_attention", operands=[("attn_mask", describe(attn_mask))])
            else:
                raise ShapeError("MultiheadAttention: attn_mask must be 2-D or 3-D",
                                 op="multi_head_attention",
                                 operands=[("attn_mask", describe(attn_mask))])

        E = self.embed_dim
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = (_rows(self.in_proj_weight, i, E) for i in range(3))
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        b_q, b_k, b_v = (_rows(self.in_proj_bias, i, E) for i in range(3))
        q = F.linear(query, w_q, b_q)
        k = F.linear(key, w_k, b_k)
        v = F.linear(value, w_v, b_v)
        q = q.reshape(tgt_len, bsz * H, hd).transpose(0, 1)
        k = k.reshape(src_len, bsz * H, hd).transpose(0, 1)
        v = v.reshape(src_len, bsz * H, hd).transpose(0, 1)

        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (bsz, src_len):
                raise ShapeError(
                    f"MultiheadAttention: key_padding_mask must be [{bsz}, {src_len}] "
                    "(batch, source length)", op="multi_head_attention",
                    operands=[("key_padding_mask", describe(key_padding_mask))])
            kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, H, 1, src_len)
            kpm = kpm.reshape(bsz * H, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm

        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * math.sqrt(1.0 / float(hd))) @ k.transpose(-2, -1)
            if attn_mask is not None:
                scores = scores + attn_mask
            weights = F.softmax(scores, dim=-1)
            if dropout_p > 0.0:
                weights = F.dropout(weights, p=dropout_p)
            out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
            out = out.reshape(tgt_len, bsz, embed_dim)
            weights = weights.reshape(bsz, H, tgt_len, src_len)
            if average_attn_weights:
                weights = weights.mean(dim=1)
            if not batched:
                out, weights = out.squeeze(1), weights.squeeze(0)
        else:
            if attn_mask is not None:
                if attn_mask.shape[0] == 1:
                    attn_mask = attn_mask.unsqueeze(0)
                else:
                    attn_mask = attn_mask.reshape(bsz, H, -1, src_len)
            q = q.reshape(bsz, H, tgt_len, hd)
            k = k.reshape(bsz, H, src_len, hd)
            v = v.reshape(bsz, H, src_len, hd)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                                 dropout_p=dropout_p, is_causal=is_causal)
            out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
            out = out.reshape(tgt_len, bsz, embed_dim)
            weights = None
            if not batched:
                out = out.squeeze(1)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        return out, weights
