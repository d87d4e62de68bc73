"""Memory plans: checkpointing that frees, the KV cache, selective recompute, the timeline."""

import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.backend.cpu import kernels
from shapeflow.cli import main as cli_main
from shapeflow.inspect.memory import LiveTracker, kv_cache_bytes, report
from shapeflow.inspect.memory.modes import checkpoint_modules
from shapeflow.inspect.memory.step import step_scratch
from shapeflow.models import GPT
from shapeflow.models.gpt import KVCache
from shapeflow.ops import base
from tests.inspect.test_memory import KORTHIKANTI, gpt_block_report, held_by_graph


def _owner(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def measured_step(model, idx, opt=None) -> tuple[int, object]:
    """(tracemalloc peak, LiveTracker peak) of forward + backward (+ step) above before."""
    _, loss = model(idx, idx)  # warm-up: caches, AdamW's state
    loss.backward()
    if opt is not None:
        opt.step()
    model.zero_grad()
    del loss
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with LiveTracker(list(model.parameters()) + [idx]) as tracker:
            out, loss = model(idx, idx)
            loss.backward()
            if opt is not None:
                opt.step()
            del out, loss
        measured = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    model.zero_grad()
    return measured, tracker.peak.value


# ---- checkpointing frees each block's input after that block's backward -----------------------
L, D, H, T, B, V = 6, 128, 4, 64, 8, 65


def test_checkpointed_block_inputs_die_with_their_backward():
    sf.manual_seed(0)
    model = GPT(V, T, L, H, D)
    checkpoint_modules(model, True)  # as report(checkpoint=True) wraps its meta copy
    inputs = []
    for block in model.transformer.h:
        forward = block.forward

        def spy(x, *args, forward=forward, **kwargs):
            inputs.append(weakref.ref(x))
            return forward(x, *args, **kwargs)

        block.forward = spy
    idx = sf.randint(0, V, (B, T))
    _, loss = model(idx, idx)
    loss.backward()  # the graph (loss) is still alive, its saved tensors are not
    assert len(inputs) == L
    assert [r() is None for r in inputs] == [True] * L


def test_checkpoint_takes_non_tensor_arguments_and_keyword_tensors():
    w = sf.randn(8, 8, requires_grad=True)
    x, bias = sf.randn(4, 8, requires_grad=True), sf.randn(8, requires_grad=True)

    def block(t, scale, *, shift):
        return ((t @ w) * scale + shift).tanh()

    block(x, 0.5, shift=bias).sum().backward()
    plain = [t.grad.numpy().copy() for t in (x, w, bias)]
    for t in (x, w, bias):
        t.grad = None
    sf.checkpoint(block, x, 0.5, shift=bias).sum().backward()
    for want, t in zip(plain, (x, w, bias)):
        np.testing.assert_array_equal(want, t.grad.numpy())


@pytest.mark.skipif(not kernels.available(), reason="NumPy's GELU and norms make scratch")
def test_checkpointed_peak_drops_on_cpu_and_in_the_plan():
    sf.manual_seed(0)
    idx = sf.randint(0, V, (B, T))
    own = GPT(V, T, L, H, D, checkpoint=True)  # sf.checkpoint(block, x): no closure
    expected, expected_tracked = measured_step(own, idx)
    wrapped = GPT(V, T, L, H, D)
    plan = report(wrapped, idx, idx, checkpoint=True)
    checkpoint_modules(wrapped, True)  # forward(*args) through a wrapper, as the plan runs it
    measured, tracked = measured_step(wrapped, idx)
    # a leak keeps L - 1 block inputs (B*T*D*4 bytes each) to the end: 12% here
    assert abs(measured - expected) <= 0.01 * expected, (measured, expected)
    assert tracked == expected_tracked == plan.peak - plan.baseline
    assert abs(plan.peak - plan.baseline - measured) <= 0.03 * measured
    assert report(own, idx, idx).peak == plan.peak


def test_checkpointed_175b_plan_peaks_at_the_unchecked_plans_peak():
    """GPT-3's plan: checkpointing used to add every block's input (4.5 GiB) to the peak."""
    model = GPT(51200, 2048, 96, 96, 12288, device="meta")
    idx = sf.empty(1, 2048, dtype=sf.int64, device="meta")
    kw = dict(precision="bf16-true", optimizer="adamw")
    plain, full = report(model, idx, idx, **kw), report(model, idx, idx, recompute="full", **kw)
    assert full.peak == plain.peak  # the peak: embedding backward, every grad, no activation
    # block inputs + the rest (the loss keeps a float64 logsumexp per row: 2048 * 8 bytes)
    assert full.activations == 96 * 2 * 2048 * 12288 + 310_444_032
    assert full.peak_phase.name == "backward"


# ---- the KV cache holds the formula, right after prefill ------------------------------------
def test_kv_cache_after_prefill_holds_exactly_the_formula():
    sf.manual_seed(0)
    model = GPT(50, 32, 3, 4, 32).eval()
    idx = sf.randint(0, 50, (2, 10))
    cache = KVCache(3)
    with sf.no_grad():
        model(idx, cache=cache)
        held = {id(_owner(t._data)): _owner(t._data).nbytes for kv in cache.layers for t in kv}
        assert sum(held.values()) == kv_cache_bytes(model, 2, 10, "float32")
        model(sf.randint(0, 50, (2, 1)), cache=cache)
        held = {id(_owner(t._data)): _owner(t._data).nbytes for kv in cache.layers for t in kv}
        assert sum(held.values()) == kv_cache_bytes(model, 2, 11, "float32")
    prompt = sf.randint(0, 50, (2, 5))
    np.testing.assert_array_equal(model.generate(prompt, 12, do_sample=False).numpy(),
                                  model.generate(prompt, 12, do_sample=False,
                                                 use_cache=False).numpy())


def test_kv_cache_on_meta_is_the_formula():
    model = GPT(50, 64, 4, 8, 64, device="meta").eval()
    cache = KVCache(4)
    idx = sf.empty(3, 40, dtype=sf.int64, device="meta")
    with sf.no_grad(), LiveTracker(list(model.parameters()) + [idx]) as tracker:
        logits, _ = model(idx, cache=cache)
        del logits
        live = tracker.mark()
    assert live == kv_cache_bytes(model, 3, 40, "float32")


# ---- selective recompute: Korthikanti et al. 2022, 34sbh per layer ------------------------------
@pytest.mark.parametrize("s,b,h,a", KORTHIKANTI)
def test_selective_recompute_keeps_34sbh_per_layer(s, b, h, a):
    rep = gpt_block_report(s, b, h, a, recompute="selective")
    row = rep.row("transformer.h.1")
    assert row.activations - row.by_kind[base.NORM_STATS] == 34 * s * b * h
    assert base.ATTENTION not in row.by_kind  # no [s, s] tensor is kept
    assert rep.activations_without_checkpoint == gpt_block_report(s, b, h, a).activations
    assert rep.recompute == "selective" and "recomputing attention cores" in str(rep)


@pytest.mark.parametrize("t", [2, 4])
def test_selective_recompute_with_tensor_parallelism_as_table_2(t):
    s, b, h, a = KORTHIKANTI[1]
    rep = gpt_block_report(s, b, h, a, recompute="selective")
    block = [x for x in rep.saved if x.path.startswith("transformer.h.0")
             and x.kind != base.NORM_STATS]
    assert sum(x.nbytes / t if x.sharded else x.nbytes for x in block) == pytest.approx(
        s * b * h * (10 + 24 / t))
    per_layer = sum(x.nbytes for x in block) / t  # + sequence parallel: 34sbh / t
    assert per_layer == pytest.approx(34 * s * b * h / t)


def test_selective_recompute_on_cpu_gradients_and_saved_bytes():
    def run(recompute):
        sf.manual_seed(3)
        model = GPT(40, 16, 2, 2, 16, dropout=0.2, recompute=recompute)
        sf.manual_seed(4)
        idx = sf.randint(0, 40, (3, 16))
        rep = report(model, idx, idx)
        _, loss = model(idx, idx)
        assert held_by_graph(loss, list(model.parameters())) == rep.activations
        loss.backward()
        return loss.item(), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}

    loss, plain = run(None)
    loss_s, sel = run("selective")
    assert loss == loss_s
    for name in plain:
        np.testing.assert_array_equal(plain[name], sel[name], err_msg=name)
    with pytest.raises(ValueError):
        GPT(40, 16, 1, 2, 16, recompute="some")


def test_selective_needs_an_attention_that_can_recompute():
    with pytest.raises(sf.memory.MemoryPlanError):
        report(nn.Linear(4, 4), sf.randn(2, 4), recompute="selective")
    with pytest.raises(sf.memory.MemoryPlanError):
        report(nn.Linear(4, 4), sf.randn(2, 4), recompute="sometimes")


def test_cli_recompute_modes(capsys):
    args = ["memory", "gpt", "--layers", "2", "--d-model", "64", "--heads", "4", "--seq", "32",
            "--vocab", "97", "--dtype", "bf16", "--dropout", "0.1"]
    out = {}
    for mode in ("none", "selective", "full"):
        assert cli_main(args + ["--recompute", mode]) == 0
        out[mode] = capsys.readouterr().out
    assert "recomputing attention cores" in out["selective"]
    assert "checkpointing every block" in out["full"]
    for mode, text in out.items():
        assert "timeline" in text and "optimizer step" in text, mode
    assert cli_main(args + ["--checkpoint"]) == 0
    assert capsys.readouterr().out == out["full"]


# ---- the optimizer step: its scratch, and the timeline -----------------------------------------
OPTIMIZERS = {
    "adamw": lambda ps: sf.optim.AdamW(ps),
    "adam-decay": lambda ps: sf.optim.Adam(ps, weight_decay=0.1),
    "adam-maximize-decay": lambda ps: sf.optim.Adam(ps, weight_decay=0.1, maximize=True),
    "amsgrad": lambda ps: sf.optim.Adam(ps, amsgrad=True),
    "sgd": lambda ps: sf.optim.SGD(ps, lr=0.01),
    "nesterov-decay": lambda ps: sf.optim.SGD(ps, lr=0.01, momentum=0.9, nesterov=True,
                                              weight_decay=0.1),
    "dampening-maximize": lambda ps: sf.optim.SGD(ps, lr=0.01, momentum=0.9, dampening=0.5,
                                                  maximize=True),
}


def _mixed_sizes():
    # one weight above NumPy's chunk (65536 elements), others under it and under 256 KiB
    return nn.Sequential(nn.Linear(64, 600), nn.Tanh(), nn.Linear(600, 512), nn.Tanh(),
                         nn.Linear(512, 100), nn.Linear(100, 3))


@pytest.fixture(params=[True, False], ids=["kernels", "numpy"])
def kernel_path(request):
    old = kernels.set_enabled(request.param)
    yield request.param
    kernels.set_enabled(old)


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_step_scratch_is_what_the_step_allocates(name, kernel_path):
    sf.manual_seed(0)
    model = _mixed_sizes()
    x = sf.randn(8, 64)
    opt = OPTIMIZERS[name](model.parameters())
    for _ in range(2):  # the state exists before the measured step, as the plan assumes
        model(x).sum().backward()
        opt.step()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        opt.step()
        measured = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    predicted = step_scratch(opt, list(model.named_parameters()), None).nbytes
    assert abs(measured - predicted) <= 8 * 1024, (measured, predicted)  # Python's objects


def test_peak_can_fall_in_the_optimizer_step(kernel_path):
    sf.manual_seed(0)
    model = nn.Linear(1024, 1024)
    x = sf.randn(4, 1024)
    opt = sf.optim.Adam(model.parameters(), weight_decay=0.1)  # grad + p * wd: 4 MiB more
    rep = report(model, x, optimizer=opt)
    assert [p.name for p in rep.timeline] == ["forward", "backward", "optimizer step"]
    assert rep.peak_phase.name == "optimizer step"
    assert rep.peak == max(p.peak for p in rep.timeline)
    assert "weight" in rep.peak_phase.where
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = model(x)
        out.sum().backward()
        opt.step()
        measured = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert abs(rep.peak - rep.baseline - measured) <= 0.02 * measured, (rep.peak, measured)


def test_timeline_of_a_gpt_says_where_each_phase_peaks():
    model = GPT(97, 32, 2, 4, 64, dropout=0.1, device="meta")
    idx = sf.empty(2, 32, dtype=sf.int64, device="meta")
    rep = report(model, idx, idx, precision="bf16-true", optimizer="adamw")
    fwd, bwd, step = rep.timeline
    assert fwd.peak < bwd.peak and rep.peak == max(fwd.peak, bwd.peak, step.peak)
    assert bwd.where.endswith("backward") and "transformer" in bwd.where
    largest = max(model.named_parameters(), key=lambda np_: np_[1].numel())[0]
    assert step.where.startswith(largest) and "fp32 copy" in step.where
    assert "timeline" in str(rep) and "<- peak" in str(rep)
    sidx = sf.empty("B", 32, dtype=sf.int64, device="meta")
    sym = report(model, sidx, sidx, precision="bf16-true", optimizer="adamw")
    assert [p.subs(B=2).peak for p in sym.timeline] == [p.peak for p in rep.timeline]
    assert [p.peak for p in sym.subs(B=2).timeline] == [p.peak for p in rep.timeline]
