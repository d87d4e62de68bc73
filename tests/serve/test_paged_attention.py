"""Paged attention against PyTorch's scaled_dot_product_attention on the same tokens."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from shapeflow.errors import ArgumentError, ShapeError
from shapeflow.serve import paged_attention as pa


def _scatter(rng, seqs_k, seqs_v, block_size, dtype, spare=3):
    """A pool holding every sequence's K/V in shuffled blocks; returns caches and block tables."""
    n_head, head_dim = seqs_k[0].shape[1:]
    need = [-(-len(k) // block_size) for k in seqs_k]
    num_blocks = sum(need) + spare
    ids = rng.permutation(num_blocks)
    kc = rng.standard_normal((num_blocks, n_head, block_size, head_dim)).astype(dtype)  # junk
    vc = rng.standard_normal(kc.shape).astype(dtype)
    tables = np.full((len(seqs_k), max(need) + 1), -1, np.int32)
    at = 0
    for s, (k, v) in enumerate(zip(seqs_k, seqs_v)):
        tables[s, :need[s]] = ids[at:at + need[s]]
        at += need[s]
        t = np.arange(len(k))
        slots = tables[s, t // block_size].astype(np.int64) * block_size + t % block_size
        pa.write_kv(kc, vc, k, v, slots)
    return kc, vc, tables


def _torch_reference(qs, ks, vs, scale):
    outs = []
    for q, k, v in zip(qs, ks, vs):
        n, c = len(q), len(k)
        tq, tk, tv = (torch.from_numpy(a).transpose(0, 1) for a in (q, k, v))  # [H, T, D]
        if n == c:
            o = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, scale=scale)
        else:
            mask = torch.arange(c)[None, :] <= (c - n + torch.arange(n))[:, None]
            o = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask, scale=scale)
        outs.append(o.transpose(0, 1).numpy())
    return np.concatenate(outs)


CASES = [  # (context_lens, query_lens)
    ([5], [5]),  # one prefill
    ([1, 17, 40], [1, 1, 1]),  # decode
    ([33, 9, 16, 64], [1, 9, 7, 16]),  # decode + a prefill + prefill chunks
    ([50, 3], [0, 3]),  # a sequence with no new tokens this step
]


@pytest.mark.parametrize("dtype,atol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("block_size", [1, 4, 16])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("impl", ["dispatch", "reference"])
def test_matches_torch_sdpa(dtype, atol, block_size, case, impl):
    rng = np.random.default_rng(block_size * 100 + len(case[0]))
    ctx, qlen = case
    n_head, head_dim = 3, 8
    ks = [rng.standard_normal((c, n_head, head_dim)).astype(dtype) for c in ctx]
    vs = [rng.standard_normal((c, n_head, head_dim)).astype(dtype) for c in ctx]
    qs = [rng.standard_normal((n, n_head, head_dim)).astype(dtype) for n in qlen]
    kc, vc, tables = _scatter(rng, ks, vs, block_size, dtype)
    q = np.concatenate(qs)
    scale = head_dim ** -0.5
    fn = pa.paged_attention if impl == "dispatch" else pa.paged_attention_reference
    out = fn(q, kc, vc, tables, np.array(ctx, np.int32), np.array(qlen, np.int32), scale)
    assert out.dtype == dtype and out.shape == q.shape
    keep = [(q_, k_, v_) for q_, k_, v_ in zip(qs, ks, vs) if len(q_)]
    want = _torch_reference(*zip(*keep), scale)
    np.testing.assert_allclose(out, want, atol=atol, rtol=0)


def test_write_kv_writes_only_the_named_rows():
    rng = np.random.default_rng(0)
    kc = rng.standard_normal((6, 2, 4, 3)).astype(np.float32)
    vc = rng.standard_normal(kc.shape).astype(np.float32)
    k0, v0 = kc.copy(), vc.copy()
    slots = np.array([5, 0, 23], np.int64)
    k = rng.standard_normal((3, 2, 3)).astype(np.float32)
    v = rng.standard_normal((3, 2, 3)).astype(np.float32)
    pa.write_kv(kc, vc, k, v, slots)
    for i, s in enumerate(slots):
        np.testing.assert_array_equal(kc[s // 4, :, s % 4], k[i])
        np.testing.assert_array_equal(vc[s // 4, :, s % 4], v[i])
        k0[s // 4, :, s % 4], v0[s // 4, :, s % 4] = k[i], v[i]
    np.testing.assert_array_equal(kc, k0)  # nothing else moved
    np.testing.assert_array_equal(vc, v0)


def test_bad_input_raises_shapeflow_errors():
    kc = np.zeros((4, 2, 4, 3), np.float32)
    with pytest.raises(ArgumentError):
        pa.write_kv(kc, kc.copy(), np.zeros((1, 2, 3), np.float32), np.zeros((1, 2, 3), np.float32),
                    np.array([16]))
    with pytest.raises(ShapeError):
        pa.write_kv(kc, kc.copy(), np.zeros((2, 2, 3), np.float32), np.zeros((2, 2, 3), np.float32),
                    np.array([1]))
    q = np.zeros((2, 2, 3), np.float32)
    with pytest.raises(ShapeError):  # query_lens do not sum to N
        pa.paged_attention(q, kc, kc, np.zeros((1, 2), np.int32), np.array([3], np.int32),
                           np.array([1], np.int32), 1.0)
    with pytest.raises(ArgumentError):  # context beyond the block table
        pa.paged_attention(q, kc, kc, np.zeros((1, 2), np.int32), np.array([9], np.int32),
                           np.array([2], np.int32), 1.0)
    with pytest.raises(ArgumentError):  # a block id outside the pool
        pa.paged_attention(q, kc, kc, np.array([[0, 7]], np.int32), np.array([6], np.int32),
                           np.array([2], np.int32), 1.0)
    with pytest.raises(ArgumentError):  # an int64 id that an int32 cast would wrap to 1
        pa.paged_attention(q, kc, kc, np.array([[0, 2**32 + 1]]), np.array([6]), np.array([2]),
                           1.0)
    with pytest.raises(ArgumentError):  # lengths that are not integers
        pa.paged_attention(q, kc, kc, np.zeros((1, 2), np.int32), np.array([2.0]),
                           np.array([2], np.int32), 1.0)


needs_c = pytest.mark.skipif(not pa.available(), reason="the paged-attention C kernel is not built")


@pytest.fixture
def numpy_only():
    old = pa.set_enabled(False)
    yield
    pa.set_enabled(old)


@needs_c
@pytest.mark.parametrize("block_size", [1, 16, 48])  # 48: a block longer than a key chunk
@pytest.mark.parametrize("n_head,head_dim", [(4, 32), (2, 64), (1, 5)])
def test_c_kernel_matches_numpy(block_size, n_head, head_dim):
    rng = np.random.default_rng(block_size + head_dim)
    ctx, qlen = [1, 130, 77, 300, 9], [1, 1, 13, 6, 9]
    ks = [rng.standard_normal((c, n_head, head_dim)).astype(np.float32) * 3 for c in ctx]
    vs = [rng.standard_normal((c, n_head, head_dim)).astype(np.float32) for c in ctx]
    kc, vc, tables = _scatter(rng, ks, vs, block_size, np.float32)
    q = rng.standard_normal((sum(qlen), n_head, head_dim)).astype(np.float32)
    args = (q, kc, vc, tables, np.array(ctx, np.int32), np.array(qlen, np.int32), 0.3)
    got = pa.paged_attention(*args)
    np.testing.assert_allclose(got, pa.paged_attention_reference(*args), atol=1e-5, rtol=0)


@needs_c
def test_c_write_kv_matches_numpy():
    rng = np.random.default_rng(1)
    for dtype in (np.float32, np.int8, np.float64):
        kc = (rng.standard_normal((5, 3, 4, 6)) * 9).astype(dtype)
        vc = (rng.standard_normal(kc.shape) * 9).astype(dtype)
        k = (rng.standard_normal((7, 3, 6)) * 9).astype(dtype)
        v = (rng.standard_normal((7, 3, 6)) * 9).astype(dtype)
        slots = rng.choice(20, 7, replace=False)
        if dtype == np.float32:  # k, v as the runner passes them: views of a fused qkv
            qkv = rng.standard_normal((7, 3 * 18)).astype(dtype)
            k, v = qkv[:, 18:36].reshape(7, 3, 6), qkv[:, 36:].reshape(7, 3, 6)
        want_k, want_v = kc.copy(), vc.copy()
        pa.write_kv_reference(want_k, want_v, k, v, slots)
        pa.write_kv(kc, vc, k, v, slots)
        np.testing.assert_array_equal(kc, want_k)
        np.testing.assert_array_equal(vc, want_v)


@needs_c
def test_c_kernel_rejects_a_bad_batch_without_writing(numpy_only):
    pa.set_enabled(True)  # the fixture restores the flag; this test wants the C path
    kc = np.zeros((4, 2, 4, 3), np.float32)
    q = np.zeros((2, 2, 3), np.float32)
    with pytest.raises(ArgumentError):
        pa.paged_attention(q, kc, kc, np.array([[0, 9]], np.int32), np.array([6], np.int32),
                           np.array([2], np.int32), 1.0)
    k = np.ones((2, 2, 3), np.float32)
    with pytest.raises(ArgumentError):
        pa.write_kv(kc, kc, k, k, np.array([3, 16]))
    assert not kc.any()  # the valid slot 3 was not written either


def test_numpy_fallback_when_disabled(numpy_only):
    assert not pa.available()
    rng = np.random.default_rng(2)
    kc = rng.standard_normal((3, 2, 4, 8)).astype(np.float32)
    q = rng.standard_normal((1, 2, 8)).astype(np.float32)
    out = pa.paged_attention(q, kc, kc, np.array([[2, 0]], np.int32), np.array([6], np.int32),
                             np.array([1], np.int32), 0.5)
    ks = np.concatenate([kc[2], kc[0]], axis=1)[:, :6].transpose(1, 0, 2)
    want = _torch_reference([q], [ks], [ks], 0.5)
    np.testing.assert_allclose(out, want, atol=2e-5)


@pytest.mark.parametrize("enabled", [True, False])
def test_nan_reaches_exactly_the_queries_that_see_it(enabled):
    rng = np.random.default_rng(5)
    ctx, qlen = [20, 20], [1, 12]
    ks = [rng.standard_normal((c, 2, 8)).astype(np.float32) for c in ctx]
    for k in ks:
        k[9, 1, 3] = np.nan  # head 1 of key 9
    vs = [rng.standard_normal((c, 2, 8)).astype(np.float32) for c in ctx]
    kc, vc, tables = _scatter(rng, ks, vs, 4, np.float32)
    qs = [rng.standard_normal((n, 2, 8)).astype(np.float32) for n in qlen]
    q = np.concatenate(qs)
    old = pa.set_enabled(enabled)
    try:
        qt = q.transpose(1, 0, 2).copy().transpose(1, 0, 2)  # a strided q too
        assert not qt.flags.c_contiguous
        out = pa.paged_attention(qt, kc, vc, tables,
                                 np.array(ctx, np.int32), np.array(qlen, np.int32), 0.35)
    finally:
        pa.set_enabled(old)
    pos = np.concatenate([np.arange(c - n, c) for c, n in zip(ctx, qlen)])
    sees = pos >= 9  # a NaN score poisons the softmax of the queries that see it, only those
    np.testing.assert_array_equal(np.isnan(out[:, 1]).all(-1), sees)
    assert not np.isnan(out[:, 0]).any() and not np.isnan(out[~sees]).any()
    want = _torch_reference(qs, ks, vs, 0.35)  # torch agrees wherever it gives a number
    ok = ~np.isnan(want)
    np.testing.assert_allclose(out[ok], want[ok], atol=2e-5)


def _built() -> bool:
    from importlib.util import find_spec

    return find_spec("shapeflow.backend.cpu._paged_attention") is not None


@pytest.mark.skipif(not _built() or os.environ.get("SHAPEFLOW_KERNELS") == "0",
                    reason="built without a C compiler, or kernels turned off")
def test_a_library_built_from_another_source_is_refused(monkeypatch, tmp_path):
    other = tmp_path / "paged_attention.c"
    other.write_text("/* same names, other semantics */\n")
    monkeypatch.setattr(pa, "_state", {"lib": None, "loaded": False, "enabled": True,
                                       "refused": None})
    monkeypatch.setattr(pa, "_SOURCE_FILE", str(other))
    assert pa._load() is None and not pa.available()
    assert "another paged_attention.c" in pa._state["refused"]


@pytest.mark.skipif(not _built() or os.environ.get("SHAPEFLOW_KERNELS") == "0",
                    reason="built without a C compiler, or kernels turned off")
def test_the_library_in_use_was_built_from_this_source():
    """paged_attention.c edited without a rebuild fails here (the loader would refuse the stale
    library and the C tests above would only skip): `python setup.py build_ext --inplace`."""
    assert pa.available(), f"paged-attention kernel refused: {pa._state['refused']}"
