"""F.multi_head_attention_forward against PyTorch's: packed and separate projections, bias_k/v,
zero attention, 2-D / 3-D / bool masks, key padding, static k/v, need_weights, is_causal;
values and float64 gradients, the meta device, and its errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.errors import ShapeError, ShapeRuntimeError

E, H, L, S, N = 4, 2, 3, 5, 2


def _inputs(batched, sep, mask, kpm, bias_kv, static, seed=0):
    """PyTorch's arguments (float64, leaves requiring grad) for one configuration."""
    g = torch.Generator().manual_seed(seed)

    def mk(*shape):
        return torch.randn(*shape, dtype=torch.float64, generator=g).requires_grad_()

    lead = (N,) if batched else ()
    q, k, v = mk(L, *lead, E), mk(S, *lead, E), mk(S, *lead, E)
    kw = {"in_proj_bias": mk(3 * E), "bias_k": mk(E) if bias_kv else None,
          "bias_v": mk(E) if bias_kv else None, "out_proj_weight": mk(E, E),
          "out_proj_bias": mk(E), "use_separate_proj_weight": sep}
    if sep:
        kw.update(q_proj_weight=mk(E, E), k_proj_weight=mk(E, E), v_proj_weight=mk(E, E))
    src = S  # the masks cover the keys given; bias_k and zero attention pad them
    if mask == "2d":
        kw["attn_mask"] = torch.randn(L, src, dtype=torch.float64, generator=g)
    elif mask == "3d":
        kw["attn_mask"] = torch.randn((N if batched else 1) * H, L, src, dtype=torch.float64,
                                      generator=g)
    elif mask == "bool":
        kw["attn_mask"] = torch.rand(L, src, generator=g) > 0.7
        kw["attn_mask"][:, 0] = False
    elif mask == "causal":
        kw["attn_mask"] = torch.ones(L, src, dtype=torch.bool).triu(1)
    if kpm:
        kw["key_padding_mask"] = torch.rand(*lead, src, generator=g) > 0.7
        kw["key_padding_mask"][..., 0] = False
    if static:
        kw["static_k"], kw["static_v"] = mk(N * H, S, E // H), mk(N * H, S, E // H)
    return (q, k, v, E, H, None if sep else mk(3 * E, E)), kw


def _to_sf(x):
    if not isinstance(x, torch.Tensor):
        return x
    return sf.tensor(x.detach().numpy()).requires_grad_(x.requires_grad)


def _compare(args, kw, need_weights=True, average=True, is_causal=False, add_zero_attn=False):
    common = {"add_zero_attn": add_zero_attn, "dropout_p": 0.0, "training": True,
              "need_weights": need_weights, "average_attn_weights": average,
              "is_causal": is_causal}
    ref = TF.multi_head_attention_forward(*args, **kw, **common)
    s_args = [_to_sf(a) for a in args]
    s_kw = {n: _to_sf(a) for n, a in kw.items()}
    ours = F.multi_head_attention_forward(*s_args, **s_kw, **common)
    for a, b in zip(ours, ref):
        if b is None:
            assert a is None
            continue
        assert tuple(a.shape) == tuple(b.shape) and a.dtype == sf.float64
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9, atol=1e-12)
    cot = np.random.default_rng(1).standard_normal(tuple(ref[0].shape))
    (ref[0] * torch.tensor(cot)).sum().backward()
    (ours[0] * sf.tensor(cot)).sum().backward()
    pairs = list(zip(args, s_args)) + [(kw[n], s_kw[n]) for n in kw]
    for t, s in pairs:
        if isinstance(t, torch.Tensor) and t.grad is not None:
            np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("batched,sep,mask,kpm,bias_kv", [
    c for c in itertools.product([True, False], [False, True], [None, "2d", "3d", "bool"],
                                 [False, True], [False, True])])
def test_matches_torch(batched, sep, mask, kpm, bias_kv):
    args, kw = _inputs(batched, sep, mask, kpm, bias_kv, False)
    _compare(args, kw, need_weights=True, average=True)
    args, kw = _inputs(batched, sep, mask, kpm, bias_kv, False)
    _compare(args, kw, need_weights=False)


@pytest.mark.parametrize("need,average,zero", list(itertools.product([True, False], [True, False],
                                                                      [True, False])))
def test_weights_and_zero_attention(need, average, zero):
    args, kw = _inputs(True, False, "2d", True, True, False)
    _compare(args, kw, need_weights=need, average=average, add_zero_attn=zero)


@pytest.mark.parametrize("need", [True, False])
def test_is_causal_and_static_kv(need):
    args, kw = _inputs(True, False, "causal", False, False, False)
    _compare(args, kw, need_weights=need, is_causal=True)
    args, kw = _inputs(True, False, None, False, False, True)
    _compare(args, kw, need_weights=need)


def test_dropout_shapes_and_meta():
    args, kw = _inputs(True, False, "2d", False, True, False)
    s_args = [_to_sf(a) for a in args]
    s_kw = {n: _to_sf(a) for n, a in kw.items()}
    out, w = F.multi_head_attention_forward(*s_args, add_zero_attn=False, dropout_p=0.5,
                                            **s_kw)
    assert out.shape == (L, N, E) and w.shape == (N, L, S + 1)
    m = {"device": "meta"}
    q, kv = sf.zeros(L, N, E, **m), sf.zeros(S, N, E, **m)
    out, w = F.multi_head_attention_forward(
        q, kv, kv, E, H, sf.zeros(3 * E, E, **m), sf.zeros(3 * E, **m), None, None, False, 0.0,
        sf.zeros(E, E, **m), sf.zeros(E, **m), average_attn_weights=False)
    assert out.shape == (L, N, E) and w.shape == (N, H, L, S) and out.device.type == "meta"


def test_errors():
    args, kw = _inputs(True, False, None, False, False, False)
    s_args = [_to_sf(a) for a in args]
    s_kw = {n: _to_sf(a) for n, a in kw.items()}
    common = {"add_zero_attn": False, "dropout_p": 0.0}
    with pytest.raises(ShapeRuntimeError, match="embed_dim_to_check"):
        F.multi_head_attention_forward(*s_args[:3], E + 1, *s_args[4:], **s_kw, **common)
    with pytest.raises(ShapeRuntimeError, match="attn_mask should be"):
        F.multi_head_attention_forward(*s_args, **s_kw, **common, attn_mask=sf.zeros(L, S + 2))
    with pytest.raises(ShapeError, match="is_causal"):
        F.multi_head_attention_forward(*s_args, **s_kw, **common, is_causal=True)
    with pytest.raises(ShapeRuntimeError, match="2-D or batched 3-D"):
        F.multi_head_attention_forward(s_args[0].unsqueeze(0), *s_args[1:], **s_kw, **common)
    with pytest.raises(ShapeError, match="in_proj_weight is None"):
        F.multi_head_attention_forward(*s_args[:5], None, **s_kw, **common)
