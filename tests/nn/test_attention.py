"""nn.MultiheadAttention's learned extra key/value (add_bias_kv) and zero attention
(add_zero_attn) against torch: parameters, outputs, weights and every gradient."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn
from tests.nn.test_layers import twin

rng = np.random.default_rng(3)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _pair(**kw):
    sf_m = nn.MultiheadAttention(8, 2, **kw)
    t_m = torch.nn.MultiheadAttention(8, 2, **kw)
    for name, p in sf_m.named_parameters():
        if "bias" in name and name not in ("bias_k", "bias_v"):
            p._data[...] = randn(*p.shape) * 0.1  # non-zero, so their placement is checked
    return sf_m, t_m


def test_bias_kv_parameters_match_torch_layout():
    sf_m, t_m = _pair(add_bias_kv=True)
    assert [(n, tuple(p.shape)) for n, p in sf_m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t_m.named_parameters()]
    fresh = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    assert np.any(fresh.bias_k._data) and np.any(fresh.bias_v._data)  # xavier_normal_, as torch
    plain = nn.MultiheadAttention(8, 2)
    assert plain.bias_k is None and plain.bias_v is None
    assert "bias_k" not in dict(plain.named_parameters())


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("bias_kv,zero_attn,kdim", [(True, False, None), (False, True, None),
                                                    (True, True, None), (True, True, 5)])
@pytest.mark.parametrize("masked", [False, True])
def test_bias_kv_and_zero_attn_match_torch(bias_kv, zero_attn, kdim, need_weights, masked):
    sf_m, t_m = _pair(add_bias_kv=bias_kv, add_zero_attn=zero_attn, kdim=kdim, vdim=kdim,
                      batch_first=True)
    kv_dim = kdim or 8
    kw = {"need_weights": need_weights}
    if masked:
        kw["key_padding_mask"] = np.array([[False, False, True, True], [True, False, False, False]])
        kw["attn_mask"] = np.triu(np.ones((3, 4), dtype=bool), 1)
    # twin compares outputs, weights (with the extra key columns), input and parameter grads
    twin(sf_m, t_m, randn(2, 3, 8), randn(2, 4, kv_dim), randn(2, 4, kv_dim), kwargs=kw)


def test_bias_kv_on_meta():
    m = nn.MultiheadAttention(16, 4, add_bias_kv=True, add_zero_attn=True, device="meta")
    x = sf.empty(10, 2, 16, device="meta")
    out, w = m(x, x, x)
    assert tuple(out.shape) == (10, 2, 16) and tuple(w.shape) == (2, 10, 12)
