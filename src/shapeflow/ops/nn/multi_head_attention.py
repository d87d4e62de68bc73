"""F.multi_head_attention_forward: PyTorch's functional multi-head attention (projections,
optional bias_k/v and zero attention, masks, heads, output projection), composed of linear,
softmax, matmul and scaled_dot_product_attention, so gradients and meta come from those."""

from __future__ import annotations

import math

from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..movement import cat, masked_fill, pad
from ..registry import public
from .attention import scaled_dot_product_attention
from .dropout import dropout
from .linear import linear
from .softmax import softmax

_OP = "multi_head_attention_forward"


def _fail(msg: str, **named) -> ShapeRuntimeError:
    return ShapeRuntimeError(f"{_OP}: {msg}", op=_OP,
                             operands=[(k, describe(v)) for k, v in named.items() if v is not None])


def _additive(mask: Tensor | None, name: str, dtype) -> Tensor | None:
    """A bool mask (True = not attended) as 0 / -inf in the query's dtype; a float one as is."""
    if mask is None:
        return None
    if mask.dtype.is_bool:
        from ...factories import zeros

        return masked_fill(zeros(tuple(mask.shape), dtype=dtype, device=mask.device), mask,
                           -math.inf)
    if not mask.dtype.is_floating_point:
        raise DTypeError(f"{_OP}: only bool and floating types of {name} are supported, got "
                         f"{mask.dtype}", op=_OP, operands=[(name, describe(mask))])
    return mask


def _check_batched(query: Tensor, key: Tensor, value: Tensor, key_padding_mask, attn_mask,
                   num_heads: int) -> bool:
    """Whether the inputs carry a batch dim (3-D) or are one sequence (2-D); checks ranks."""
    named = {"query": query, "key": key, "value": value, "key_padding_mask": key_padding_mask,
             "attn_mask": attn_mask}
    if query.ndim not in (2, 3):
        raise _fail(f"query should be unbatched 2-D or batched 3-D, got {query.ndim}-D", **named)
    batched = query.ndim == 3
    if key.ndim != query.ndim or value.ndim != query.ndim:
        raise _fail(f"for {'batched' if batched else 'unbatched'} {query.ndim}-D query, key and "
                    f"value must be {query.ndim}-D, got {key.ndim}-D and {value.ndim}-D",
                    **named)
    if key_padding_mask is not None and key_padding_mask.ndim != query.ndim - 1:
        raise _fail(f"key_padding_mask must be {query.ndim - 1}-D, got "
                    f"{key_padding_mask.ndim}-D", **named)
    if attn_mask is not None:
        if attn_mask.ndim not in (2, 3):
            raise _fail(f"attn_mask must be 2-D or 3-D, got {attn_mask.ndim}-D", **named)
        if not batched and attn_mask.ndim == 3 and attn_mask.shape[0] != num_heads:
            raise _fail(f"a 3-D attn_mask of unbatched inputs must be [{num_heads}, L, S]",
                        **named)
    return batched


def _projections(query, key, value, embed_dim, in_proj_weight, in_proj_bias,
                 use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight):
    if in_proj_bias is None:
        b_q = b_k = b_v = None
    else:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ShapeError(f"{_OP}: use_separate_proj_weight is True but q_proj_weight, "
                             "k_proj_weight or v_proj_weight is None", op=_OP)
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if in_proj_weight is None:
            raise ShapeError(f"{_OP}: use_separate_proj_weight is False but in_proj_weight is "
                             "None", op=_OP)
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)


def _heads(t: Tensor, static, bsz: int, num_heads: int, head_dim: int, name: str) -> Tensor:
    """[L, N, E] as [N * heads, L, head_dim], or the static_k / static_v given in its place."""
    if static is None:
        return t.reshape(t.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if static.ndim != 3 or static.shape[0] != bsz * num_heads or static.shape[2] != head_dim:
        raise _fail(f"{name} must be [{bsz * num_heads}, S, {head_dim}] (batch * num_heads, "
                    f"source length, head_dim), got {format_shape(static.shape)}",
                    **{name: static})
    return static


@public(sf=False, functional=True)
def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention of query [L, N, E] (or [L, E]) over key/value [S, N, E]; returns
    (output [L, N, E], weights [N, L, S] averaged over heads, [N, heads, L, S], or None)."""
    batched = _check_batched(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _additive(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise ShapeError(f"{_OP}: is_causal is a hint and needs attn_mask too (pass the causal "
                         "mask as attn_mask)", op=_OP)
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # scaled_dot_product_attention builds the causal mask itself
    else:
        attn_mask = _additive(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False  # the mask given is applied as it is, with the padding

    if embed_dim != embed_dim_to_check:
        raise _fail(f"query's embed dim {embed_dim} is not embed_dim_to_check "
                    f"{embed_dim_to_check}", query=query)
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise _fail(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}", query=query)
    same = (tuple(key.shape[:2]) == tuple(value.shape[:2]) if use_separate_proj_weight
            else tuple(key.shape) == tuple(value.shape))
    if not same:
        raise _fail("key and value shapes do not match", key=key, value=value)

    q, k, v = _projections(query, key, value, embed_dim, in_proj_weight, in_proj_bias,
                           use_separate_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight)

    if attn_mask is not None:
        expect = ((tgt_len, src_len) if attn_mask.ndim == 2
                  else (bsz * num_heads, tgt_len, src_len))
        if tuple(attn_mask.shape) != expect:
            dims = "L, S" if attn_mask.ndim == 2 else "batch * num_heads, L, S"
            raise _fail(f"attn_mask should be {format_shape(expect)} ({dims}: target and source "
                        f"lengths), got {format_shape(attn_mask.shape)}", attn_mask=attn_mask)
        if attn_mask.ndim == 2:
            attn_mask = attn_mask.unsqueeze(0)

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise ShapeError(f"{_OP}: bias cannot be added to static key or value", op=_OP)
        k = cat([k, bias_k.reshape(1, 1, embed_dim).expand(1, bsz, embed_dim)])
        v = cat([v, bias_v.reshape(1, 1, embed_dim).expand(1, bsz, embed_dim)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise ShapeError(f"{_OP}: bias_k and bias_v must both be given or both be None", op=_OP)

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads(k, static_k, bsz, num_heads, head_dim, "static_k")
    v = _heads(v, static_v, bsz, num_heads, head_dim, "static_v")

    if add_zero_attn:  # one more key and value, all zeros, that every query may attend to
        k = pad(k, (0, 0, 0, 1))
        v = pad(v, (0, 0, 0, 1))
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))

    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise _fail(f"key_padding_mask should be [{bsz}, {src_len}] (batch, source "
                        f"length), got {format_shape(key_padding_mask.shape)}",
                        key_padding_mask=key_padding_mask)
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0

    if need_weights:
        scores = (q * math.sqrt(1.0 / float(head_dim))) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias)
        out = out.reshape(tgt_len, bsz, out.shape[1])
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1
                     else attn_mask.reshape(bsz, num_heads, -1, src_len))
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias)
    out = out.reshape(tgt_len, bsz, out.shape[1])
    return (out if batched else out.squeeze(1)), None
