"""Next-token sampling: greedy argmax, or temperature / top-k / top-p with a generator per
completion, so a seeded request draws the same tokens whatever else shares its batch."""

from __future__ import annotations

import numpy as np

from .sampling_params import SamplingParams

__all__ = ["make_rng", "sample", "sample_row"]


def make_rng(params: SamplingParams, index: int, engine_rng: np.random.Generator
             ) -> np.random.Generator | None:
    """The generator of completion `index`: from (seed, index) when the request has a seed,
    else drawn from the engine's; None for greedy requests (no draws)."""
    if params.greedy:
        return None
    if params.seed is not None:
        return np.random.default_rng([params.seed & (2 ** 63 - 1), index])
    return np.random.default_rng(engine_rng.integers(2 ** 63))


def sample_row(logits: np.ndarray, params: SamplingParams, rng: np.random.Generator) -> int:
    """One token from a row of logits: temperature, then top-k, then top-p, one uniform draw.

    Computed in float64; exactly one draw per token, so a preempted and recomputed sequence
    continues its stream unchanged.
    """
    x = logits.astype(np.float64) / params.temperature
    v = x.shape[0]
    k = params.top_k if 0 < params.top_k < v else v
    if k == v and params.top_p >= 1.0:  # no filter: no sort (a 50k vocabulary sorts in ms)
        c = np.cumsum(np.exp(x - x.max()))
        return min(int(np.searchsorted(c, rng.random() * c[-1], side="right")), v - 1)
    if k < v:
        keep = np.argpartition(-x, k - 1)[:k]  # the k largest, any order
    else:
        keep = np.arange(v)
    order = keep[np.argsort(-x[keep], kind="stable")]
    p = np.exp(x[order] - x[order[0]])
    p /= p.sum()
    if params.top_p < 1.0:
        c = np.cumsum(p)
        # the smallest set whose mass reaches top_p (the token that crosses it is kept)
        cut = int(np.searchsorted(c, params.top_p * c[-1], side="left")) + 1
        p = p[:cut] / c[cut - 1]
        order = order[:cut]
    c = np.cumsum(p)
    i = int(np.searchsorted(c, rng.random() * c[-1], side="right"))
    return int(order[min(i, len(order) - 1)])


def sample(logits: np.ndarray, params: list[SamplingParams],
           rngs: list[np.random.Generator | None]) -> list[int]:
    """The next token of each row of logits `[S, V]` under its request's params."""
    greedy = [i for i, p in enumerate(params) if p.greedy]
    out = [0] * len(params)
    if greedy:
        best = logits[greedy].argmax(axis=-1) if len(greedy) > 1 else [
            logits[greedy[0]].argmax()]
        for i, t in zip(greedy, best):
            out[i] = int(t)
    for i, p in enumerate(params):
        if not p.greedy:
            out[i] = sample_row(logits[i], p, rngs[i])
    return out
