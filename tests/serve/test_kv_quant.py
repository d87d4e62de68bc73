"""Quantized paged KV blocks: the eager cache's format, attention within quantization error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import shapeflow as sf
from shapeflow.errors import ArgumentError, DTypeError
from shapeflow.quant import QuantError, quantize_tensor
from shapeflow.serve import kv_quant
from shapeflow.serve import paged_attention as pa

# max |attention(quantized K/V) - attention(float K/V)| for unit-normal K, V and head_dim 16:
# a few quantization steps (int8: 1/127 of the row max; e4m3: 3 mantissa bits; e5m2: 2)
QUANT_ATOL = {"int8": 0.03, "fp8-e4m3": 0.15, "fp8-e5m2": 0.3}


def _pool(rng, kv_dtype, ctx, n_head, head_dim, block_size):
    """Quantized blocks holding each sequence's K/V (written with write_kv, shuffled blocks)."""
    need = [-(-c // block_size) for c in ctx]
    nb = sum(need) + 2
    ids = rng.permutation(nb)
    kc = kv_quant.QuantizedBlocks((nb, n_head, block_size, head_dim), kv_dtype)
    vc = kv_quant.QuantizedBlocks((nb, n_head, block_size, head_dim), kv_dtype)
    tables = np.zeros((len(ctx), max(need)), np.int32)
    ks, vs, at = [], [], 0
    for s, c in enumerate(ctx):
        tables[s, :need[s]] = ids[at:at + need[s]]
        at += need[s]
        k = rng.standard_normal((c, n_head, head_dim)).astype(np.float32)
        v = rng.standard_normal((c, n_head, head_dim)).astype(np.float32)
        t = np.arange(c)
        pa.write_kv(kc, vc, k, v, tables[s, t // block_size] * block_size + t % block_size)
        ks.append(k)
        vs.append(v)
    return kc, vc, tables, ks, vs


def _sdpa(qs, ks, vs, scale):
    outs = []
    for q, k, v in zip(qs, ks, vs):
        n, c = len(q), len(k)
        mask = torch.arange(c)[None, :] <= (c - n + torch.arange(n))[:, None]
        tq, tk, tv = (torch.from_numpy(np.ascontiguousarray(a)).transpose(0, 1)
                      for a in (q, k, v))
        o = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask, scale=scale)
        outs.append(o.transpose(0, 1).numpy())
    return np.concatenate(outs)


@pytest.mark.parametrize("kv_dtype", kv_quant.KV_DTYPES)
@pytest.mark.parametrize("c_kernel", [True, False])
def test_attention_within_quantization_error(kv_dtype, c_kernel):
    if c_kernel and not pa.available():
        pytest.skip("the paged-attention C kernel is not built")
    rng = np.random.default_rng(len(kv_dtype))
    ctx, qlen, h, d, bs = [40, 7, 100], [1, 7, 5], 2, 16, 16
    kc, vc, tables, ks, vs = _pool(rng, kv_dtype, ctx, h, d, bs)
    qs = [rng.standard_normal((n, h, d)).astype(np.float32) for n in qlen]
    q = np.concatenate(qs)
    old = pa.set_enabled(c_kernel)
    try:
        out = pa.paged_attention(q, kc, vc, tables, np.array(ctx, np.int32),
                                 np.array(qlen, np.int32), d ** -0.5)
    finally:
        pa.set_enabled(old)
    assert out.dtype == np.float32 and out.shape == q.shape
    # exactly attention over what the blocks store (dequantized)...
    deq = [(kc.dequantize(tables[s]).transpose(0, 2, 1, 3).reshape(-1, h, d)[:c],
            vc.dequantize(tables[s]).transpose(0, 2, 1, 3).reshape(-1, h, d)[:c])
           for s, c in enumerate(ctx)]
    want_q = _sdpa(qs, [a for a, _ in deq], [b for _, b in deq], d ** -0.5)
    np.testing.assert_allclose(out, want_q, atol=1e-5, rtol=0)
    # ...and within the quantization error of the float result
    want_f = _sdpa(qs, ks, vs, d ** -0.5)
    err = np.abs(out - want_f).max()
    assert 0 < err < QUANT_ATOL[kv_dtype], err


@pytest.mark.parametrize("kv_dtype", kv_quant.KV_DTYPES)
def test_stored_rows_are_the_quantizers_per_token_per_head(kv_dtype):
    rng = np.random.default_rng(3)
    kc = kv_quant.QuantizedBlocks((4, 3, 4, 8), kv_dtype)
    vc = kv_quant.QuantizedBlocks((4, 3, 4, 8), kv_dtype)
    # rows of every magnitude, an all-zero row and one below float32's normal range
    k = (rng.standard_normal((5, 3, 8)) * 10.0 ** rng.integers(-40, 30, (5, 3, 1))).astype(
        np.float32)
    k[1, 0], k[2, 1, :2] = 0.0, 1e-44
    v = rng.standard_normal((5, 3, 8)).astype(np.float32)
    slots = np.array([15, 2, 3, 8, 0])
    pa.write_kv(kc, vc, k, v, slots)
    want = quantize_tensor(k.reshape(15, 8), kv_dtype, axis=0)  # the eager cache's quantizer
    for i, s in enumerate(slots):
        np.testing.assert_array_equal(kc.data[s // 4, :, s % 4].view(np.uint8),
                                      want.qdata.reshape(5, 3, 8)[i].view(np.uint8))
        np.testing.assert_array_equal(kc.scale[s // 4, :, s % 4], want.scale.reshape(5, 3)[i])
    assert not kc.scale[1].any() and not kc.scale[3, :, :3].any()  # untouched rows stay 0


@pytest.mark.parametrize("kv_dtype", kv_quant.KV_DTYPES)
def test_bytes_equal_kv_cache_bytes(kv_dtype):
    cfg = {"n_layer": 3, "n_head": 4, "n_embd": 64}
    nb, bs = 10, 16
    layers = [(kv_quant.QuantizedBlocks((nb, 4, bs, 16), kv_dtype),
               kv_quant.QuantizedBlocks((nb, 4, bs, 16), kv_dtype)) for _ in range(3)]
    held = sum(k.nbytes + v.nbytes for k, v in layers)
    assert held == sf.memory.kv_cache_bytes(cfg, 1, nb * bs, dtype=kv_dtype)
    assert layers[0][0].data.itemsize == 1 and layers[0][0].scale.dtype == np.float32


def test_rows_copy_with_their_scales():
    rng = np.random.default_rng(4)
    kc = kv_quant.QuantizedBlocks((3, 2, 4, 8), "int8")
    vc = kv_quant.QuantizedBlocks((3, 2, 4, 8), "int8")
    x = rng.standard_normal((4, 2, 8)).astype(np.float32)
    pa.write_kv(kc, vc, x, x, np.arange(4, 8))  # block 1
    kc[2, :, :3] = kc[1, :, :3]  # as the pool copies a partly shared block
    np.testing.assert_array_equal(kc.dequantize(np.array([2]))[0, :, :3],
                                  kc.dequantize(np.array([1]))[0, :, :3])
    assert not kc.scale[2, :, 3].any()


def test_a_non_finite_row_is_the_quantizers_error():
    kc = kv_quant.QuantizedBlocks((2, 1, 4, 8), "int8")
    k = np.ones((1, 1, 8), np.float32)
    k[0, 0, 5] = np.inf
    with pytest.raises(QuantError):
        pa.write_kv(kc, kv_quant.QuantizedBlocks((2, 1, 4, 8), "int8"), k, k, np.array([0]))
    assert not kc.scale.any()


def test_bad_kv_dtype_and_bad_batch():
    with pytest.raises(DTypeError):
        kv_quant.QuantizedBlocks((2, 1, 4, 8), "int4")
    kc = kv_quant.QuantizedBlocks((2, 1, 4, 8), "int8")
    q = np.zeros((1, 1, 8), np.float32)
    for enabled in (True, False):
        old = pa.set_enabled(enabled)
        try:
            with pytest.raises(ArgumentError):  # a block id outside the pool
                pa.paged_attention(q, kc, kc, np.array([[5]], np.int32), np.array([3], np.int32),
                                   np.array([1], np.int32), 1.0)
        finally:
            pa.set_enabled(old)


@pytest.mark.parametrize("kv_dtype", kv_quant.KV_DTYPES)
@pytest.mark.parametrize("c_kernel", [True, False])
def test_every_finite_byte_decodes_as_ml_dtypes_does(kv_dtype, c_kernel):
    if c_kernel and not pa.available():
        pytest.skip("the paged-attention C kernel is not built")
    vc = kv_quant.QuantizedBlocks((1, 1, 1, 256), kv_dtype)
    raw = vc.data.view(np.uint8)
    raw[0, 0, 0] = np.arange(256)
    value = vc.data.astype(np.float32)
    raw[~np.isfinite(value)] = 0  # inf / NaN bytes: the quantizer never writes them
    vc.scale[:] = 0.375
    kc = kv_quant.QuantizedBlocks((1, 1, 1, 256), kv_dtype)
    old = pa.set_enabled(c_kernel)
    try:  # one key: the softmax weight is 1 and the output is the value row, decoded
        out = pa.paged_attention(np.ones((1, 1, 256), np.float32), kc, vc,
                                 np.zeros((1, 1), np.int32), np.ones(1, np.int32),
                                 np.ones(1, np.int32), 1.0)
    finally:
        pa.set_enabled(old)
    np.testing.assert_array_equal(out[0, 0], vc.data[0, 0, 0].astype(np.float32) * 0.375)
