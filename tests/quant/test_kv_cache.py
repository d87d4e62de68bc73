"""The GPT's KV cache stored int8 / fp8 with a float32 scale per token and head."""

import ml_dtypes
import numpy as np
import pytest

import shapeflow as sf
from shapeflow.models.gpt import KVCache, make_kv_cache
from shapeflow.quant.metrics import sqnr


def _gpt(n_layer=2, n_head=4, n_embd=32):
    sf.manual_seed(0)
    return sf.models.GPT(vocab_size=40, block_size=32, n_layer=n_layer, n_head=n_head,
                         n_embd=n_embd).eval()


def _step_logits(model, ids, cache, prefix):
    """Logits of each token after the prefix, fed one at a time through `cache`."""
    out = []
    with sf.no_grad():
        model(sf.tensor(ids[:, :prefix]), cache=cache)
        for t in range(prefix, ids.shape[1]):
            logits, _ = model(sf.tensor(ids[:, t:t + 1]), cache=cache)
            out.append(logits.numpy()[:, -1])
    return np.stack(out, 1)


@pytest.mark.parametrize("dtype,min_db", [("int8", 55.0), ("fp8-e4m3", 40.0),
                                          ("fp8-e5m2", 35.0)])
def test_decoding_with_a_quantized_cache_stays_close_to_the_float_cache(dtype, min_db):
    model = _gpt()
    ids = np.random.default_rng(1).integers(0, 40, (2, 20))
    ref = _step_logits(model, ids, KVCache(2), 8)
    got = _step_logits(model, ids, make_kv_cache(2, dtype), 8)
    assert sqnr(ref, got) > min_db
    assert not np.array_equal(ref, got)  # the cache really was quantized


@pytest.mark.parametrize("dtype", ["int8", "fp8-e4m3"])
def test_the_cache_holds_exactly_what_kv_cache_bytes_counts(dtype):
    model = _gpt(n_layer=3, n_head=4, n_embd=32)
    cache = make_kv_cache(3, dtype)
    ids = sf.randint(0, 40, (2, 11))
    with sf.no_grad():
        model(ids[:, :7], cache=cache)
        model(ids[:, 7:], cache=cache)
    assert cache.length == 11
    want = sf.memory.kv_cache_bytes(model, batch=2, seq_len=11, dtype=dtype)
    assert cache.nbytes == want == 2 * 3 * 4 * 11 * 2 * (8 + 4)
    kq, ks, vq, vs = cache.layers[0]
    np_type = np.int8 if dtype == "int8" else ml_dtypes.float8_e4m3fn
    assert kq.dtype == vq.dtype == np_type and kq.shape == (2, 4, 11, 8)
    assert ks.dtype == vs.dtype == np.float32 and ks.shape == (2, 4, 11, 1)
    # the float cache of the same tokens: 4 bytes a value, no scales
    fcache = KVCache(3)
    with sf.no_grad():
        model(ids, cache=fcache)
    assert fcache.nbytes == sf.memory.kv_cache_bytes(model, 2, 11, "float32")
    assert fcache.nbytes / cache.nbytes == pytest.approx(32 / 12)


def test_each_token_and_head_has_its_own_symmetric_int8_scale():
    cache = make_kv_cache(1, "int8")
    rng = np.random.default_rng(0)
    k = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    k[0, 1, 2] *= 100  # one loud token of one head: the others keep their precision
    v = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    kd, vd, past = cache.update(0, sf.tensor(k), sf.tensor(v))
    assert past == 0
    kq, ks, _, _ = cache.layers[0]
    np.testing.assert_array_equal(ks[..., 0], (np.abs(k).max(-1) / 127).astype(np.float32))
    np.testing.assert_array_equal(kq, np.clip(np.rint(k / ks), -127, 127).astype(np.int8))
    np.testing.assert_array_equal(kd.numpy(), kq.astype(np.float32) * ks)
    assert np.abs(kd.numpy() - k).max(-1)[0, 0].max() <= ks[0, 0].max() / 2 + 1e-7
    # a later token does not touch what earlier ones stored
    k2 = 50 * rng.standard_normal((1, 2, 1, 8)).astype(np.float32)
    _, _, past = cache.update(0, sf.tensor(k2), sf.tensor(k2))
    assert past == 3
    np.testing.assert_array_equal(cache.layers[0][0][:, :, :3], kq)


def test_generate_with_an_int8_cache():
    model = _gpt()
    prompt = sf.randint(0, 40, (1, 5))
    out = model.generate(prompt, 6, do_sample=False, kv_cache_dtype="int8")
    assert out.shape == (1, 11)
    np.testing.assert_array_equal(out.numpy()[:, :5], prompt.numpy())
    full = model.generate(prompt, 6, do_sample=False, kv_cache_dtype="int8", use_cache=False)
    assert full.shape == (1, 11)


def test_an_unknown_cache_dtype_is_refused():
    with pytest.raises(sf.DTypeError, match="kv_cache_dtype 'int3'"):
        _gpt().generate(sf.randint(0, 40, (1, 3)), 1, kv_cache_dtype="int3")
