"""Latency-aware chunked prefill: while decodes run, a step adds only a capped number of
prompt tokens (fixed, or adapted from measured step times), and greedy output is unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.errors import ArgumentError
from shapeflow.models import GPT
from shapeflow.serve import Engine, SamplingParams
from shapeflow.serve.scheduler import next_prefill_cap

GREEDY = dict(temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def model() -> GPT:
    sf.manual_seed(0)
    m = GPT(vocab_size=40, block_size=400, n_layer=2, n_head=4, n_embd=32)
    for p in m.parameters():
        if p.ndim == 2:
            nn.init.normal_(p, std=0.3)
    return m.eval()


def reference(m: GPT, prompt: list[int], n: int) -> list[int]:
    out = m.generate(sf.tensor(np.array([prompt])), n, do_sample=False)
    return out.numpy()[0, len(prompt):].tolist()


def test_next_prefill_cap_aims_at_the_latency_budget():
    # 100 prompt tokens added 0.8 ms where 0.5 ms is allowed: shrink in proportion
    assert next_prefill_cap(100, 0.8e-3, 0.5e-3, 1, 512) == 62
    # they added 4 ms: down by 8 at once; 100 ms: at most by 16 (one noisy step)
    assert next_prefill_cap(100, 4e-3, 0.5e-3, 1, 512) == 12
    assert next_prefill_cap(100, 100e-3, 0.5e-3, 1, 512) == 6
    # they added 0.4 ms of 0.5 allowed: grow in proportion, never more than double
    assert next_prefill_cap(100, 0.4e-3, 0.5e-3, 1, 512) == 125
    assert next_prefill_cap(100, 0.01e-3, 0.5e-3, 1, 512) == 200
    assert next_prefill_cap(400, 0.01e-3, 0.5e-3, 1, 512) == 512  # the step's budget
    assert next_prefill_cap(1, 9e-3, 0.5e-3, 1, 512) == 1  # always some progress


def _run_with_decodes(m, **kw):
    """4 decodes running, then a 300-token prompt: the prefill tokens of each step that also
    decodes, the outputs in request order."""
    eng = Engine(m, max_num_batched_tokens=128, **kw)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 40, 8).tolist() for _ in range(4)]
    long = rng.integers(0, 40, 300).tolist()
    ids = [eng.add_request(p, SamplingParams(max_tokens=60, **GREEDY)) for p in prompts]
    eng.step()  # the short prompts' prefill
    eng.step()  # a decode-only step: what the decodes cost alone
    ids.append(eng.add_request(long, SamplingParams(max_tokens=4, **GREEDY)))
    alongside, final = [], {}
    while eng.has_unfinished():
        for out in eng.step():
            if out.finished:
                final[out.request_id] = out.outputs[0].token_ids
        if eng.scheduler.last_decodes and eng.scheduler.last_prefill:
            alongside.append(eng.scheduler.last_prefill)
    return alongside, [final[i] for i in ids], prompts + [long]


def test_a_fixed_cap_bounds_prefill_beside_decodes_and_keeps_greedy_exact(model):
    alongside, outs, prompts = _run_with_decodes(model, max_prefill_tokens_per_step=24)
    assert alongside and max(alongside) <= 24
    for p, o in zip(prompts, outs):
        assert o == reference(model, p, len(o))


def test_the_adaptive_cap_starts_small_and_stays_within_the_budget(model):
    alongside, outs, prompts = _run_with_decodes(model)
    assert alongside[0] == 2 * 16  # two blocks before a step with prefill was timed
    assert max(alongside) <= 128 - 4
    for p, o in zip(prompts, outs):
        assert o == reference(model, p, len(o))


def test_without_decodes_a_prompt_takes_the_whole_budget(model):
    eng = Engine(model, max_num_batched_tokens=128, max_prefill_tokens_per_step=8)
    eng.add_request(list(range(40)) * 5, SamplingParams(max_tokens=2, **GREEDY))
    eng.step()
    assert eng.scheduler.last_decodes == 0 and eng.scheduler.last_prefill == 128


def test_prefill_cap_arguments_are_checked(model):
    with pytest.raises(ArgumentError):
        Engine(model, max_prefill_tokens_per_step=0)
    with pytest.raises(ArgumentError):
        Engine(model, prefill_latency_budget=0.0)
