"""Continuous batching: decodes first, chunked prefill in a token budget, preemption."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import shapeflow as sf
from shapeflow.models import GPT
from shapeflow.models.gpt import GPTConfig
from shapeflow.serve import Engine, SamplingParams
from shapeflow.serve.kv_pool import KVPool
from shapeflow.serve.scheduler import RUNNING, WAITING, Scheduler, Sequence

MODEL = SimpleNamespace(config=GPTConfig(vocab_size=50, block_size=256, n_layer=1, n_head=1,
                                         n_embd=4))


def seq(i: int, n: int) -> Sequence:
    return Sequence(i, None, 0, list(range(n)), n)


def run(sched: Scheduler) -> dict:
    """One step without a model: schedule, commit, and sample token 1 where logits are due."""
    chunks = sched.schedule()
    sched.commit(chunks)
    for c in chunks:
        if c.need_logits:
            c.seq.tokens.append(1)
    return {c.seq.seq_id: c.num_tokens for c in chunks}


def test_decodes_first_then_prefill_chunks_in_the_budget():
    sched = Scheduler(KVPool(MODEL, 64, 4), max_num_batched_tokens=8)
    a = seq(0, 3)
    sched.add(a)
    assert run(sched) == {0: 3}
    b = seq(1, 20)
    sched.add(b)
    steps = [run(sched) for _ in range(3)]
    assert steps == [{0: 1, 1: 7}, {0: 1, 1: 7}, {0: 1, 1: 6}]  # a decodes every step
    assert len(b.tokens) == 21 and run(sched) == {0: 1, 1: 1}


def test_without_chunking_a_prompt_waits_for_a_whole_budget():
    sched = Scheduler(KVPool(MODEL, 64, 4), max_num_batched_tokens=8,
                      enable_chunked_prefill=False)
    a, b = seq(0, 3), seq(1, 9)
    sched.add(a)
    sched.add(b)
    assert run(sched) == {0: 3}  # b's 9 tokens do not fit the 5 left
    assert run(sched) == {0: 1}  # ... nor the 7 left beside a's decode
    assert b.status == WAITING and not b.block_table


def test_max_num_seqs_bounds_the_running_batch():
    sched = Scheduler(KVPool(MODEL, 64, 4), max_num_seqs=2, max_num_batched_tokens=100)
    seqs = [seq(i, 5) for i in range(3)]
    for s in seqs:
        sched.add(s)
    assert run(sched) == {0: 5, 1: 5}
    assert [s.status for s in seqs] == [RUNNING, RUNNING, WAITING]


def test_the_newest_sequence_is_preempted_and_keeps_its_tokens():
    pool = KVPool(MODEL, num_blocks=4, block_size=2)
    sched = Scheduler(pool, max_num_batched_tokens=100)
    a, b = seq(0, 3), seq(1, 3)
    sched.add(a)
    sched.add(b)
    assert run(sched) == {0: 3, 1: 3}  # two blocks each: the pool is full
    assert run(sched) == {0: 1, 1: 1}  # token 4 of each still fits their second block
    assert run(sched) == {0: 1}  # a needs a third block: b, the newer one, gives its back
    assert b.status == WAITING and sched.waiting[0] is b and b.block_table == []
    assert b.tokens == [0, 1, 2, 1, 1] and b.num_computed == 0 and sched.num_preemptions == 1
    assert pool.num_used == 3


def test_a_preempted_sequence_is_prefilled_from_its_cached_blocks():
    pool = KVPool(MODEL, num_blocks=8, block_size=2)
    sched = Scheduler(pool, max_num_batched_tokens=100)
    a = seq(0, 6)
    sched.add(a)
    run(sched)
    sched._preempt(a)
    assert run(sched) == {0: 1}  # 6 of its 7 tokens found in the prefix cache
    assert a.num_cached == 6 and pool.hits == 6


def test_long_prompt_does_not_stall_running_decodes():
    """A 300-token prompt arriving during 4 decodes: each decode still gets a token a step."""
    sf.manual_seed(0)
    m = GPT(vocab_size=30, block_size=400, n_layer=1, n_head=2, n_embd=16).eval()
    rng = np.random.default_rng(0)
    eng = Engine(m, max_num_batched_tokens=32, block_size=16)
    for _ in range(4):
        eng.add_request(rng.integers(0, 30, 8).tolist(), SamplingParams(max_tokens=40, seed=1))
    eng.step()
    long_id = eng.add_request(rng.integers(0, 30, 300).tolist(), SamplingParams(max_tokens=2))
    steps = 0
    while True:
        outs = {o.request_id: o for o in eng.step()}
        steps += 1
        assert all(str(i) in outs and len(outs[str(i)].outputs[0].delta_token_ids) == 1
                   for i in range(4))
        if long_id in outs:
            break
    assert steps == -(-300 // 28)  # 28 prompt tokens a step beside the 4 decodes
