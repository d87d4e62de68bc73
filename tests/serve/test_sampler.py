"""Sampling: greedy, temperature, top-k, top-p and per-request seeds, against torch.softmax."""

from __future__ import annotations

import numpy as np
import torch

from shapeflow.serve import SamplingParams
from shapeflow.serve.sampler import make_rng, sample, sample_row

LOGITS = np.array([2.0, 1.5, 0.3, -1.0, 0.9, -3.0], np.float32)


def freqs(params: SamplingParams, draws: int = 10000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = np.bincount([sample_row(LOGITS, params, rng) for _ in range(draws)],
                         minlength=len(LOGITS))
    return counts / draws


def test_greedy_is_argmax_per_row():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 50)).astype(np.float32)
    params = [SamplingParams(temperature=0)] * 5
    assert sample(logits, params, [None] * 5) == logits.argmax(-1).tolist()
    one = SamplingParams(temperature=1.0, top_k=1)
    assert sample(logits[:1], [one], [rng]) == [int(logits[0].argmax())]


def test_temperature_draws_follow_softmax():
    for t in (0.5, 1.0, 1.7):
        want = torch.softmax(torch.tensor(LOGITS, dtype=torch.float64) / t, 0).numpy()
        np.testing.assert_allclose(freqs(SamplingParams(temperature=t)), want, atol=0.02)


def test_top_k_keeps_the_k_largest_renormalized():
    got = freqs(SamplingParams(temperature=1.0, top_k=3))
    top = torch.topk(torch.tensor(LOGITS), 3)
    want = np.zeros(len(LOGITS))
    want[top.indices.numpy()] = torch.softmax(top.values.double(), 0).numpy()
    np.testing.assert_allclose(got, want, atol=0.02)


def test_top_p_keeps_the_smallest_set_reaching_p():
    p = torch.softmax(torch.tensor(LOGITS, dtype=torch.float64), 0).numpy()
    order = np.argsort(-p)
    for top_p in (0.3, 0.6, 0.9):
        keep = order[:int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1]
        want = np.zeros(len(p))
        want[keep] = p[keep] / p[keep].sum()
        np.testing.assert_allclose(freqs(SamplingParams(top_p=top_p)), want, atol=0.02)


def test_seeded_generators_repeat_and_differ_by_completion():
    sp = SamplingParams(seed=42)
    engine_rng = np.random.default_rng(0)
    draws = [[sample_row(LOGITS, sp, g) for _ in range(30)]
             for g in (make_rng(sp, 0, engine_rng), make_rng(sp, 0, np.random.default_rng(9)),
                       make_rng(sp, 1, engine_rng))]
    assert draws[0] == draws[1] != draws[2]
    assert make_rng(SamplingParams(temperature=0), 0, engine_rng) is None
