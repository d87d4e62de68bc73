"""The serving engine against the reference: GPT.generate(do_sample=False) and model(idx)."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.errors import ArgumentError
from shapeflow.models import GPT
from shapeflow.serve import CharTokenizer, Engine, SamplingParams
from shapeflow.serve import paged_attention as pa

V = 40
VOCAB = "abcdefghijklmnopqrstuvwxyz0123456789 .,!"


def make_model(block_size: int = 96, seed: int = 0, n_embd: int = 32) -> GPT:
    """A tiny GPT whose weights are large enough that greedy tokens vary (std 0.3)."""
    sf.manual_seed(seed)
    m = GPT(vocab_size=V, block_size=block_size, n_layer=2, n_head=4, n_embd=n_embd)
    for p in m.parameters():
        if p.ndim == 2:
            nn.init.normal_(p, std=0.3)
    return m.eval()


@pytest.fixture(scope="module")
def model():
    return make_model()


@pytest.fixture(scope="module")
def long_model():
    return make_model(block_size=560, seed=1)


def reference(m: GPT, prompt: list[int], n: int) -> list[int]:
    out = m.generate(sf.tensor(np.array([prompt])), n, do_sample=False)
    return out.numpy()[0, len(prompt):].tolist()


def forward(m: GPT, ids: list[int]) -> np.ndarray:
    with sf.no_grad():
        return m(sf.tensor(np.array([ids])))[0].numpy()


def prompts_of(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, V, n).tolist() for n in lengths]


GREEDY = SamplingParams(temperature=0, max_tokens=20)


@pytest.mark.parametrize("block_size", [1, 5, 16])
def test_greedy_equals_generate_across_block_sizes(model, block_size):
    prompts = prompts_of([1, 7, 16, 33])
    eng = Engine(model, block_size=block_size)
    outs = eng.generate(prompts, GREEDY)
    for p, o in zip(prompts, outs):
        assert o.outputs[0].token_ids == reference(model, p, 20)
        assert o.finished and o.outputs[0].finish_reason == "length"
    assert eng.stats()["kv_blocks_used"] == 0


@pytest.mark.parametrize("caching", [False, True])
def test_greedy_equals_generate_with_chunked_prefill(model, caching):
    prompts = prompts_of([30, 9, 41], seed=1)
    prompts.append(prompts[0][:25] + prompts[1])  # a prefix hit when caching
    eng = Engine(model, block_size=4, max_num_batched_tokens=3,
                 enable_prefix_caching=caching)
    outs = eng.generate(prompts, GREEDY)
    for p, o in zip(prompts, outs):
        assert o.outputs[0].token_ids == reference(model, p, 20)
    assert eng.step_count > 30  # 106 prompt tokens, three a step: prefill was chunked


def test_runner_logits_equal_model_forward(model):
    """Two sequences in one ragged batch, then a decode step from the paged cache."""
    eng = Engine(model, block_size=4, num_blocks=32)
    runner, bs = eng.runner, 4
    a, b = prompts_of([10, 6], seed=2)
    runner._weights()
    ta, tb = [3, 7, 1], [12, 0]  # block tables: any free blocks, in any order
    ids = np.array(a + b)
    pos = np.concatenate([np.arange(10), np.arange(6)])
    slots = np.array([ta[p // bs] * bs + p % bs for p in range(10)]
                     + [tb[p // bs] * bs + p % bs for p in range(6)])
    tables = np.array([ta, tb + [0]], np.int32)
    logits = runner.forward(ids, pos, slots, tables, np.array([10, 6], np.int32),
                            np.array([10, 6], np.int32), np.arange(16))
    want_a = forward(model, a)[0]
    want_b = forward(model, b)[0]
    np.testing.assert_allclose(logits[:10], want_a, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(logits[10:], want_b, atol=1e-4, rtol=1e-4)
    # decode: token 10 of a, reading the 10 cached tokens in place
    step = runner.forward(np.array([5]), np.array([10]), np.array([ta[2] * bs + 2]),
                          np.array([ta], np.int32), np.array([11], np.int32),
                          np.array([1], np.int32), np.array([0]))
    want = forward(model, a + [5])[0, -1]
    np.testing.assert_allclose(step[0], want, atol=1e-4, rtol=1e-4)


def _count_writes(monkeypatch) -> list:
    """Wrap write_kv: one (rows, bytes) entry per call."""
    calls = []
    real = pa.write_kv

    def counting(k_cache, v_cache, k, v, slots):
        calls.append((k.shape[0], k.nbytes + v.nbytes))
        return real(k_cache, v_cache, k, v, slots)

    monkeypatch.setattr(pa, "write_kv", counting)
    return calls


def test_decode_step_writes_bytes_independent_of_length(model, monkeypatch):
    calls = _count_writes(monkeypatch)
    eng = Engine(model, block_size=8)
    eng.add_request(prompts_of([5])[0], SamplingParams(temperature=0, max_tokens=80))
    per_step = []
    while eng.has_unfinished():
        calls.clear()
        eng.step()
        per_step.append(sum(b for _, b in calls))
    decode = per_step[1:]
    c = model.config
    one_token = 2 * c.n_layer * c.n_embd * 4  # keys and values of every layer, float32
    assert len(decode) == 79 and set(decode) == {one_token}  # at T = 6 as at T = 84


def test_pool_bytes_equal_kv_cache_bytes(model):
    bs = 8
    eng = Engine(model, block_size=bs, num_blocks=40, enable_prefix_caching=False)
    block = sf.memory.kv_cache_bytes(model, 1, bs, dtype="float32")
    pool = eng.pool
    allocated = sum(a.nbytes for a in pool.k_caches + pool.v_caches)
    assert eng.stats()["kv_bytes_total"] == allocated == 40 * block
    prompts = prompts_of([3, 17, 30], seed=3)
    for p in prompts:
        eng.add_request(p, SamplingParams(temperature=0, max_tokens=25))
    generated = {}
    checked = 0
    while eng.has_unfinished():
        for o in eng.step():
            generated[o.request_id] = len(o.outputs[0].token_ids)
        live = [len(p) + generated.get(str(i), 0) - 1 for i, p in enumerate(prompts)
                if str(i) in eng.requests and str(i) in generated]
        if len(live) == 3:
            used = eng.stats()["kv_bytes_used"]
            need = sum(sf.memory.kv_cache_bytes(model, 1, t, dtype="float32") for t in live)
            assert need <= used < need + len(live) * block  # waste < one block a sequence
            checked += 1
    assert checked > 10 and eng.stats()["kv_bytes_used"] == 0


def test_prefix_hit_prefills_only_the_unique_tail(long_model, monkeypatch):
    shared = prompts_of([448], seed=4)[0]
    a, b = (shared + t for t in prompts_of([64, 64], seed=5))
    eng = Engine(long_model, block_size=16)
    sp = SamplingParams(temperature=0, max_tokens=8)
    eng.generate([a], sp)
    calls = _count_writes(monkeypatch)
    out = eng.generate([b], sp)[0]
    rows = [n for n, _ in calls]
    assert rows[0] == 64 and len(rows) == 2 * 8  # two layers: 64 new rows, then 7 decodes
    assert out.metrics.num_cached_tokens == 448
    st = eng.stats()
    assert st["prefix_cache_hits"] == 448 and st["prefix_cache_queries"] == 2 * 512
    assert out.outputs[0].token_ids == reference(long_model, b, 8)


def test_partial_block_match_copies_rows(model, monkeypatch):
    shared = prompts_of([21], seed=6)[0]  # two blocks of 8 and five tokens of the third
    a, b = shared + [1, 2, 3, 4, 5, 6], shared + [7, 8, 9]
    eng = Engine(model, block_size=8)
    sp = SamplingParams(temperature=0, max_tokens=12)
    ra = eng.generate([a], sp)[0]
    calls = _count_writes(monkeypatch)
    rb = eng.generate([b], sp)[0]
    assert calls[0][0] == 3 and rb.metrics.num_cached_tokens == 21  # 16 shared + 5 copied
    assert rb.outputs[0].token_ids == reference(model, b, 12)
    again = eng.generate([a], sp)[0]  # a's own third block was copied from, not written
    assert again.outputs[0].token_ids == ra.outputs[0].token_ids == reference(model, a, 12)


def test_preemption_gives_the_same_outputs(model):
    prompts = prompts_of([12, 20, 7, 15, 26], seed=7)
    params = [SamplingParams(temperature=0, max_tokens=30),
              SamplingParams(temperature=0.9, top_k=10, seed=3, max_tokens=30)]
    for sp in params:
        ample = Engine(model, block_size=4).generate(prompts, sp)
        tiny = Engine(model, block_size=4, num_blocks=16)  # 64 tokens for ~200 wanted
        outs = tiny.generate(prompts, sp)
        assert tiny.stats()["num_preemptions"] > 0
        for x, y in zip(ample, outs):
            assert x.outputs[0].token_ids == y.outputs[0].token_ids
            assert len(y.outputs[0].token_ids) == 30 and y.outputs[0].finish_reason == "length"
        assert tiny.stats()["kv_blocks_free"] == 16


def test_a_request_the_pool_cannot_hold_is_refused(model):
    eng = Engine(model, block_size=4, num_blocks=5)
    with pytest.raises(ArgumentError, match="KV blocks"):
        eng.add_request([1] * 10, SamplingParams(max_tokens=11))
    eng.add_request([1] * 10, SamplingParams(max_tokens=10))  # 20 tokens: exactly 5 blocks


def test_abort_frees_blocks(model):
    eng = Engine(model, block_size=4, num_blocks=64, max_num_batched_tokens=8)
    ids = [eng.add_request(p, SamplingParams(max_tokens=50, seed=1))
           for p in prompts_of([20, 30, 5], seed=8)]
    for _ in range(6):
        eng.step()
    assert eng.stats()["kv_blocks_used"] > 0 and eng.stats()["num_running"] >= 2
    for rid in ids:
        eng.abort(rid)
    eng.abort("no such request")
    st = eng.stats()
    assert not eng.has_unfinished() and st["kv_blocks_free"] == 64 == st["kv_blocks_total"]
    assert st["num_running"] == st["num_waiting"] == 0 and eng.step() == []


def test_seeded_request_is_reproducible_whatever_the_batch(model):
    p = prompts_of([9], seed=9)[0]
    sp = SamplingParams(temperature=1.0, top_p=0.9, seed=123, max_tokens=25)
    alone = Engine(model, seed=0).generate([p], sp)[0].outputs[0].token_ids
    others = [SamplingParams(temperature=1.0, max_tokens=25)] * 3
    batch = Engine(model, seed=5).generate(prompts_of([4, 30, 12], seed=10) + [p],
                                           others + [sp])
    assert batch[-1].outputs[0].token_ids == alone
    other = Engine(model).generate([p], SamplingParams(temperature=1.0, top_p=0.9, seed=124,
                                                       max_tokens=25))
    assert other[0].outputs[0].token_ids != alone


def test_n_completions_share_the_prompt_blocks(model):
    p = prompts_of([32], seed=11)[0]
    eng = Engine(model, block_size=8)
    eng.add_request(p, SamplingParams(n=3, temperature=1.0, seed=7, max_tokens=10))
    while eng.stats()["step_count"] < 2:
        eng.step()
    # 4 prompt blocks shared by three, plus each one's own block for its new tokens
    assert eng.stats()["kv_blocks_used"] == 4 + 3
    outs = []
    while eng.has_unfinished():
        outs = eng.step()
    comps = outs[0].outputs
    assert [c.index for c in comps] == [0, 1, 2]
    assert len({tuple(c.token_ids) for c in comps}) == 3
    assert all(len(c.token_ids) == 10 for c in comps)
    greedy = eng.generate([p], SamplingParams(n=2, temperature=0, max_tokens=10))[0]
    assert [c.token_ids for c in greedy.outputs] == [reference(model, p, 10)] * 2


def test_stop_string_is_never_sent_in_part(model):
    tok = CharTokenizer(VOCAB)
    p = "hello world"
    ref = tok.decode(reference(model, tok.encode(p), 30))
    stop = ref[10:13]
    first = ref.find(stop)
    eng = Engine(model, tok)
    eng.add_request(p, SamplingParams(temperature=0, max_tokens=30, stop=[stop, "@@"]))
    deltas, last = [], None
    while eng.has_unfinished():
        for o in eng.step():
            deltas.append(o.outputs[0].delta_text)
            last = o.outputs[0]
            assert ref[:first].startswith(last.text)  # what was sent is never taken back
    assert "".join(deltas) == last.text == ref[:first]
    assert last.finish_reason == "stop" and last.stop_reason == stop


def test_stop_token_and_context_limit(model):
    p = prompts_of([6], seed=12)[0]
    ref = reference(model, p, 20)
    stop_tok = ref[7]
    out = Engine(model).generate([p], SamplingParams(temperature=0, max_tokens=20,
                                                     stop_token_ids=[stop_tok]))[0].outputs[0]
    upto = ref.index(stop_tok)
    assert out.token_ids == ref[:upto + 1] and out.finish_reason == "stop"
    assert out.stop_reason == stop_tok
    eng = Engine(model, max_model_len=40)
    full = eng.generate([p], SamplingParams(temperature=0, max_tokens=None))[0].outputs[0]
    assert len(full.token_ids) == 34 and full.finish_reason == "length"
    assert full.token_ids == reference(model, p, 34)


def test_streamed_text_adds_up(model):
    tok = CharTokenizer(VOCAB)
    eng = Engine(model, tok, max_num_batched_tokens=5)
    rid = eng.add_request("abc def", SamplingParams(temperature=0.8, seed=2, max_tokens=15))
    text, ids, outs = "", [], []
    while eng.has_unfinished():
        for o in eng.step():
            assert o.request_id == rid and o.prompt == "abc def"
            text += o.outputs[0].delta_text
            ids += o.outputs[0].delta_token_ids
            outs.append(o)
    final = outs[-1]
    assert final.finished and not any(o.finished for o in outs[:-1])
    assert text == final.outputs[0].text == tok.decode(ids) and ids == final.outputs[0].token_ids
    m = final.metrics
    assert m.arrival_time <= m.first_scheduled_time <= m.first_token_time <= m.finished_time


def test_bad_requests_are_argument_errors(model):
    tok = CharTokenizer(VOCAB)
    eng = Engine(model, tok)
    with pytest.raises(ArgumentError, match="context length"):
        eng.add_request("a" * 96)
    with pytest.raises(ArgumentError):
        eng.add_request("ABC")  # not in the vocabulary
    with pytest.raises(ArgumentError, match="empty"):
        eng.add_request("")
    with pytest.raises(ArgumentError):
        eng.add_request([1, V])  # a token id outside the vocabulary
    with pytest.raises(ArgumentError):
        eng.add_request("abc", SamplingParams(temperature=-1))
    with pytest.raises(ArgumentError):
        eng.add_request("abc", {"temperature": 0})
    eng.add_request("abc", request_id="x")
    with pytest.raises(ArgumentError, match="in use"):
        eng.add_request("abc", request_id="x")
    with pytest.raises(ArgumentError):
        Engine(model, tok, max_model_len=97)
    with pytest.raises(ArgumentError):
        Engine(model, tok, kv_dtype="int4")
    with pytest.raises(ArgumentError):
        Engine(model, tok, block_size=0)
    with pytest.raises(ArgumentError):
        Engine(model).add_request("abc")  # text without a tokenizer


@pytest.mark.parametrize("kv_dtype", ["int8", "fp8-e4m3"])
def test_quantized_kv_pool(model, kv_dtype):
    eng = Engine(model, block_size=8, num_blocks=20, kv_dtype=kv_dtype)
    assert eng.stats()["kv_bytes_total"] == sf.memory.kv_cache_bytes(model, 1, 160,
                                                                      dtype=kv_dtype)
    p = prompts_of([12], seed=13)[0]
    out = eng.generate([p], SamplingParams(temperature=0, max_tokens=5))[0].outputs[0]
    assert len(out.token_ids) == 5
    runner = eng.runner
    n = len(p)
    logits = runner.forward(np.array(p), np.arange(n), np.arange(n), np.array([[0, 1]],
                            np.int32), np.array([n], np.int32), np.array([n], np.int32),
                            np.arange(n))
    want = forward(model, p)[0]
    err = np.abs(logits - want).max()
    assert err < 0.15 * np.abs(want).max()


def test_stats_and_sf_serve():
    assert sf.serve.Engine is Engine
    m = make_model(block_size=32)
    eng = sf.serve.Engine(m, CharTokenizer(VOCAB), model_name="tiny")
    assert eng.model_name == "tiny" and eng.max_model_len == 32 and eng.tokenizer.name == "char"
    eng.generate("abc", SamplingParams(max_tokens=4))
    st = eng.stats()
    for key in ("num_running", "num_waiting", "kv_blocks_total", "kv_blocks_used",
                "kv_blocks_free", "prefix_cache_queries", "prefix_cache_hits",
                "num_preemptions", "step_count", "time_model_s", "time_schedule_s"):
        assert key in st
    assert st["step_count"] == 4 and st["time_model_s"] > 0


def test_gpt2_activation_and_eps_are_followed():
    """A loaded GPT-2 uses tanh GELU (and may use another LayerNorm eps): greedy still matches."""
    sf.manual_seed(3)
    m = GPT(vocab_size=V, block_size=48, n_layer=2, n_head=2, n_embd=16,
            activation="gelu_tanh", layer_norm_eps=1e-3)
    for p in m.parameters():
        if p.ndim == 2:
            nn.init.normal_(p, std=0.5)
    m.eval()
    prompts = prompts_of([5, 11], seed=14)
    eng = Engine(m, block_size=4)
    outs = eng.generate(prompts, GREEDY)
    for p, o in zip(prompts, outs):
        assert o.outputs[0].token_ids == reference(m, p, 20)
    p = prompts[1]
    n = len(p)
    logits = eng.runner.forward(np.array(p), np.arange(n), np.arange(n),
                                np.array([[0, 1, 2]], np.int32), np.array([n], np.int32),
                                np.array([n], np.int32), np.arange(n))
    np.testing.assert_allclose(logits, forward(m, p)[0], atol=1e-5, rtol=1e-5)
