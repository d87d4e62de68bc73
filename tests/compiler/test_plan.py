"""The memory plan per bucket: printed before any data exists, equal to sf.memory.report's
inference activations at the bucket's bounds to the byte, and a valid placement."""

from __future__ import annotations

import pytest

import shapeflow as sf
from shapeflow.compiler.plan import lifetimes
from shapeflow.models import GPT, MLP, ViT


def _report_activations(model, x):
    rep = sf.memory.report(model, x, mode="inference")
    return rep.inference_peak - rep.params - rep.inputs


CASES = [
    ("mlp", lambda: MLP(in_features=784, hidden=[256, 256], out_features=10), "B",
     lambda B, L: sf.empty(B, 784, device="meta"), [dict(B=1), dict(B=8), dict(B=100)]),
    ("gpt", lambda: GPT(vocab_size=256, block_size=128, n_layer=2, n_head=4, n_embd=64), "B,L",
     lambda B, L: sf.empty(B, L, dtype=sf.int64, device="meta"),
     [dict(B=1, L=1), dict(B=2, L=64), dict(B=3, L=100)]),
    ("vit", lambda: ViT(image_size=32, patch_size=8, in_channels=3, num_classes=10, dim=64,
                        depth=2, heads=4), "B",
     lambda B, L: sf.empty(B, 3, 32, 32, device="meta"), [dict(B=1), dict(B=6)]),
]


@pytest.mark.parametrize("name,build,dynamic,make,sizes", CASES, ids=[c[0] for c in CASES])
def test_plan_equals_memory_report_at_the_bucket_bounds(name, build, dynamic, make, sizes):
    model = build().eval()
    compiled = sf.compile(model, dynamic=dynamic)
    B, L = sf.dims("B L")
    example = make(B, L)  # symbolic: no data anywhere
    for at in sizes:
        plan = compiled.plan(example, **at)
        bounds = {n: hi for n, (lo, hi) in plan.bounds.items()}
        assert all(plan.bounds[n][0] <= v <= plan.bounds[n][1] for n, v in at.items())
        expected = _report_activations(model, make(bounds.get("B", 1), bounds.get("L", 1)))
        assert plan.arena == plan.peak == expected
    assert compiled.report().counts["traces"] == 1


def test_placement_never_overlaps_live_values():
    model = GPT(vocab_size=64, block_size=64, n_layer=2, n_head=2, n_embd=32).eval()
    compiled = sf.compile(model, dynamic="B,L")
    plan = compiled.plan(sf.empty(*sf.dims("B L"), dtype=sf.int64, device="meta"), B=2, L=40)
    tape = compiled._compiled.tapes[compiled._compiled.last_phase or
                                    next(iter(compiled._compiled.tapes))]
    life = lifetimes(tape)
    env = {n: hi for n, (lo, hi) in plan.bounds.items()}
    from shapeflow.compiler.tape import slot_nbytes

    spans = [(life[s], plan.offsets[s], plan.offsets[s] + slot_nbytes(tape.slots[s], env))
             for s in life]
    for (la, a0, a1), (lb, b0, b1) in ((x, y) for i, x in enumerate(spans) for y in spans[i + 1:]):
        if a0 < a1 and b0 < b1 and not (la[1] < lb[0] or lb[1] < la[0]):
            assert a1 <= b0 or b1 <= a0
        assert max(a1, b1) <= plan.arena


def test_plan_needs_every_size():
    compiled = sf.compile(MLP(in_features=4, hidden=[4], out_features=2).eval(), dynamic="B")
    with pytest.raises(sf.compiler.ReplayError, match="nothing traced"):
        compiled.plan(B=4)
    compiled.plan(sf.empty(sf.Dim("B"), 4, device="meta"), B=4)
    with pytest.raises(sf.compiler.ReplayError, match="give a size for B"):
        compiled.plan()
