"""MultiheadAttention, with PyTorch's parameters (in_proj_weight, in_proj_bias, out_proj);
and `sdpa_kernel`, which picks the attention kernel (as `torch.nn.attention`)."""

from __future__ import annotations

import contextlib

from ..errors import ShapeError
from ..factories import empty
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


class MultiheadAttention(Module):
    """softmax(Q K^T / sqrt(d) + mask) V over num_heads heads, then an output projection.

    Inputs are [L, N, E] (or [N, L, E] with batch_first, or unbatched [L, E]);
    forward returns (output, attention weights or None), computed by
    F.multi_head_attention_forward with this module's parameters (as PyTorch's module).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ShapeError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
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
        if add_bias_kv:  # one learned key and value appended to every sequence
            self.bias_k = Parameter(empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(empty((1, 1, embed_dim), **kw))
        else:
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
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

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
        batch_first = self.batch_first and query.ndim == 3
        if batch_first:  # the functional form takes [L, N, E]
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        separate = not self._qkv_same_embed_dim
        out, weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        return (out.transpose(0, 1) if batch_first else out), weights
