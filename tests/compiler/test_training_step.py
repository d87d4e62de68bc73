"""A compiled training step (forward, backward, optimizer.step(), zero_grad) equals eager
bitwise: losses, parameters, .grad, optimizer state and running statistics, for the reference
models, across sizes in one bucket and under autocast; and what it cannot replay runs eagerly
and says why."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.models import GPT, MLP, CharLSTM, ResNet, ViT

F = nn.functional


def _tokens(B, L, vocab):
    return sf.randint(0, vocab, (B, L)), sf.randint(0, vocab, (B, L))


MODELS = {
    "mlp": (lambda: MLP(in_features=12, hidden=[16, 16], out_features=4), "B",
            lambda B, L: (sf.randn(B, 12), sf.randint(0, 4, (B,))),
            lambda m, x, y: F.cross_entropy(m(x), y), [(8, 0), (8, 0), (5, 0), (7, 0)]),
    "gpt": (lambda: GPT(vocab_size=17, block_size=16, n_layer=2, n_head=2, n_embd=16,
                        dropout=0.1), "B,L",
            lambda B, L: _tokens(B, L, 17), lambda m, x, y: m(x, y)[1],
            [(2, 8), (2, 8), (2, 6), (2, 7), (1, 8)]),
    "vit": (lambda: ViT(image_size=8, patch_size=4, in_channels=3, num_classes=5, dim=16,
                        depth=1, heads=2), "B",
            lambda B, L: (sf.randn(B, 3, 8, 8), sf.randint(0, 5, (B,))),
            lambda m, x, y: F.cross_entropy(m(x), y), [(4, 0), (4, 0), (3, 0)]),
    "resnet": (lambda: ResNet(layers=(1, 1, 1, 1), num_classes=5, in_channels=3, width=4), "B",
               lambda B, L: (sf.randn(B, 3, 8, 8), sf.randint(0, 5, (B,))),
               lambda m, x, y: F.cross_entropy(m(x), y), [(4, 0), (4, 0), (3, 0)]),
    "lstm": (lambda: CharLSTM(vocab_size=11, embed_dim=8, hidden_size=12, num_layers=2),
             "B,L", lambda B, L: _tokens(B, L, 11), lambda m, x, y: m(x, y)[1],
             [(2, 8), (2, 8), (2, 5), (2, 7)]),
}


def _train(name: str, compiled: bool, autocast: bool = False):
    """Losses and final state of a few AdamW steps, eager or compiled, from one seed."""
    build, dynamic, make, loss_of, sizes = MODELS[name]
    sf.manual_seed(0)
    model = build().train()
    opt = sf.optim.AdamW(model.parameters(), lr=1e-2)
    sf.manual_seed(1)
    batches = [make(B, L) for B, L in sizes]

    def step(x, y):
        opt.zero_grad()
        if autocast:
            with sf.autocast("cpu", dtype=sf.bfloat16):
                loss = loss_of(model, x, y)
        else:
            loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        return loss

    run = sf.compile(step, dynamic=dynamic) if compiled else step
    sf.manual_seed(2)  # dropout draws from here, in both runs alike
    losses = [run(x, y).detach().numpy() for x, y in batches]
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    grads = [p.grad.numpy() for p in model.parameters() if p.grad is not None]
    moments = [s["exp_avg_sq"].numpy() for s in opt.state.values()]
    return losses, state, grads, moments, run


def _assert_same(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("name", list(MODELS))
def test_training_steps_equal_eager_bitwise(name):
    eager = _train(name, compiled=False)
    compiled = _train(name, compiled=True)
    for e, c in zip(eager[:4], compiled[:4]):
        _assert_same(e, c) if isinstance(e, list) else _assert_same(list(e.values()),
                                                                    list(c.values()))
    counts = compiled[4].report().counts
    # one trace with no .grad yet, one with them: then every size in the bucket replays
    assert counts["traces"] == 2 and counts["eager"] == 0
    assert counts["replays"] == len(MODELS[name][4])


def test_training_step_under_autocast_equals_eager():
    eager = _train("gpt", compiled=False, autocast=True)
    compiled = _train("gpt", compiled=True, autocast=True)
    _assert_same(eager[0], compiled[0])
    _assert_same(list(eager[1].values()), list(compiled[1].values()))
    assert compiled[4].report().counts["eager"] == 0


def test_batch_norm_running_stats_advance_in_a_compiled_step():
    _, state_e, *_ = _train("resnet", compiled=False)
    _, state_c, *_ = _train("resnet", compiled=True)
    assert int(state_c["bn1.num_batches_tracked"]) == 3
    np.testing.assert_array_equal(state_e["bn1.running_var"], state_c["bn1.running_var"])


def _mlp_and_data(seed=0):
    sf.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    x, y = sf.randn(5, 6), sf.randint(0, 3, (5,))
    return model, x, y


def test_gradients_accumulate_across_calls_without_zero_grad():
    """backward only, twice, then a step outside: .grad sums into the existing tensors."""
    def accumulating(model):
        def accumulate(x, y):
            F.cross_entropy(model(x), y).backward()
        return accumulate

    results = []
    for compiled in (False, True):
        model, x, y = _mlp_and_data()
        accumulate = accumulating(model)
        run = sf.compile(accumulate) if compiled else accumulate
        for _ in range(3):
            run(x, y)
        results.append([p.grad.numpy().copy() for p in model.parameters()])
    _assert_same(*results)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_either_way_and_a_scheduler_step(set_to_none):
    def stepping(model, opt, sched):
        def step(x, y):
            opt.zero_grad(set_to_none=set_to_none)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            opt.step()
            sched.step()
            return loss
        return step

    results = []
    for compiled in (False, True):
        model, x, y = _mlp_and_data()
        opt = sf.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
        step = stepping(model, opt, sf.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5))
        run = sf.compile(step) if compiled else step
        losses = [run(x, y).item() for _ in range(4)]
        results.append((losses, [p.detach().numpy().copy() for p in model.parameters()],
                        opt.param_groups[0]["lr"]))
        if compiled:
            assert run.report().counts["eager"] == 0
    assert results[0][0] == results[1][0] and results[0][2] == results[1][2] == 0.5 * 0.5**4
    _assert_same(results[0][1], results[1][1])


def _reason(run) -> str:
    return str(run.report())


def test_a_training_forward_alone_runs_eagerly_and_says_why():
    model, x, y = _mlp_and_data()

    def forward(x):
        return model(x)  # backward would run outside the region

    run = sf.compile(forward)
    out = run(x)
    assert out.requires_grad and out.grad_fn is not None
    out.sum().backward()  # the eager graph works
    assert model[0].weight.grad is not None
    assert "compile the whole step" in _reason(run)
    with pytest.raises(sf.compiler.ReplayError, match="whole step"):
        sf.compile(forward, fullgraph=True)(x)


def test_a_grad_set_by_hand_and_a_gradient_hook_run_eagerly():
    model, x, y = _mlp_and_data()

    def by_hand(x, y):
        F.cross_entropy(model(x), y).backward()
        model[0].bias.grad = None  # not through zero_grad: the replay would not do it

    run = sf.compile(by_hand)
    run(x, y)
    assert model[0].bias.grad is None and model[0].weight.grad is not None
    assert "set outside backward" in _reason(run)

    def hooked(x, y):
        h = model(x)
        h.register_hook(lambda g: g * 2)
        F.cross_entropy(h, y).backward()

    run = sf.compile(hooked)
    run(x, y)
    assert "register_hook" in _reason(run)


def test_the_replay_reads_live_parameters_and_optimizer_state():
    """load_state_dict between steps, and a learning rate changed by hand, are seen."""
    model, x, y = _mlp_and_data()
    twin, _, _ = _mlp_and_data()
    opts = [sf.optim.Adam(m.parameters(), lr=0.1) for m in (model, twin)]

    def make_step(m, opt):
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    run, eager = sf.compile(make_step(model, opts[0])), make_step(twin, opts[1])
    for i in range(4):
        if i == 2:
            fresh, _, _ = _mlp_and_data(seed=5)
            for m in (model, twin):
                m.load_state_dict(fresh.state_dict())
            for o in opts:
                o.param_groups[0]["lr"] = 0.01
        assert run(x, y).item() == eager(x, y).item()
    _assert_same([p.detach().numpy() for p in model.parameters()],
                 [p.detach().numpy() for p in twin.parameters()])
    assert run.report().counts["eager"] == 0


@pytest.mark.parametrize("name", ["gpt", "mlp"])
def test_training_plan_equals_memory_report_to_the_byte(name):
    """The plan of a training step's bucket, at its bounds, is the peak sf.memory.report
    simulates for the same step (forward and backward, the transients inside each node's
    backward included), above the weights, inputs and optimizer state."""
    if name == "gpt":
        model = GPT(vocab_size=64, block_size=64, n_layer=2, n_head=2, n_embd=32).to("meta")

        def forward(x, y):
            return model(x, y)  # (logits, loss): held until the step returns, as the report

        def example(B, L):
            return (sf.empty(B, L, dtype=sf.int64, device="meta"),
                    sf.empty(B, L, dtype=sf.int64, device="meta"))
        dynamic, report_kw = "B,L", {}
    else:
        model = MLP(in_features=12, hidden=[16, 16], out_features=4).to("meta")

        def forward(x, y):
            out = model(x)
            return out, F.cross_entropy(out, y)

        def example(B, L):
            return sf.empty(B, 12, device="meta"), sf.empty(B, dtype=sf.int64, device="meta")
        dynamic, report_kw = "B", {"loss_fn": F.cross_entropy}
    opt = sf.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        out, loss = forward(x, y)
        loss.backward()
        opt.step()
        return loss

    compiled = sf.compile(step, dynamic=dynamic)
    B, L = sf.dims("B L")
    plan = compiled.plan(*example(B, L), B=6, L=40)
    bounds = {n: hi for n, (lo, hi) in plan.bounds.items()}
    x, y = example(bounds["B"], bounds.get("L", 1))
    if name == "gpt":
        rep = sf.memory.report(model, x, y, optimizer="adamw")
    else:
        rep = sf.memory.report(model, x, target=y, optimizer="adamw", **report_kw)
    backward = next(p for p in rep.timeline if p.name == "backward")
    assert plan.peak == backward.peak - rep.params - rep.inputs - rep.optimizer_state
    assert plan.arena >= plan.peak


def test_concurrent_calls_of_one_compiled_step_run_one_at_a_time():
    """Two threads stepping the same compiled step: the replays hand intermediates to their
    backward through shared op objects, so they take turns; the weights end as 2n eager steps
    of the same batch leave them (the order of identical steps does not matter)."""
    import sys
    import threading

    results = []
    for compiled in (True, False):
        sf.manual_seed(0)
        model = GPT(vocab_size=17, block_size=16, n_layer=1, n_head=2, n_embd=16)
        opt = sf.optim.SGD(model.parameters(), lr=0.1)
        x, y = _tokens(2, 8, 17)

        def step(x, y, model=model, opt=opt):
            opt.zero_grad()
            loss = model(x, y)[1]
            loss.backward()
            opt.step()
            return loss

        run = sf.compile(step) if compiled else step
        if compiled:
            run(x, y)
            run(x, y)  # both traces made: the threads only replay
            old = sys.getswitchinterval()
            sys.setswitchinterval(1e-6)  # switch threads as often as CPython will
            try:
                def ten_steps(run=run, x=x, y=y):
                    for _ in range(10):
                        run(x, y)

                threads = [threading.Thread(target=ten_steps) for _ in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(timeout=120)
            finally:
                sys.setswitchinterval(old)
        else:
            for _ in range(22):
                run(x, y)
        results.append([p.detach().numpy().copy() for p in model.parameters()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_grad_scaler_step_runs_eagerly_and_equals_eager():
    """GradScaler's scale and inf check are host-side: the step breaks (it replayed the
    optimizer on scaled gradients before) and gives eager's weights and scale."""
    results = []
    for compiled in (False, True):
        model, x, y = _mlp_and_data()
        opt = sf.optim.SGD(model.parameters(), lr=0.1)
        scaler = sf.amp.GradScaler("cpu", init_scale=2.0**4)

        def step(x, y, model=model, opt=opt, scaler=scaler):
            opt.zero_grad()
            scaler.scale(F.cross_entropy(model(x), y)).backward()
            scaler.step(opt)
            scaler.update()

        run = sf.compile(step) if compiled else step
        for _ in range(3):
            run(x, y)
        results.append([p.detach().numpy().copy() for p in model.parameters()])
        if compiled:
            assert "GradScaler.scale" in _reason(run)
    _assert_same(*results)


def test_manual_seed_in_the_region_reseeds_at_each_replay():
    results = []
    for compiled in (False, True):
        sf.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5))
        x = sf.randn(4, 6)

        def forward(x, model=model):
            sf.manual_seed(7)  # the same mask at every call, replayed or not
            return model(x)

        run = sf.compile(forward) if compiled else forward
        with sf.no_grad():
            outs = [run(x).numpy().copy() for _ in range(3)]
        results.append(outs)
        if compiled:
            assert run.report().counts["replays"] == 3
    _assert_same(results[0], results[1])
    np.testing.assert_array_equal(results[1][0], results[1][2])


def test_batch_norm_cumulative_average_breaks_and_equals_eager():
    """momentum=None averages over the batches seen, a count read on the host: the step
    breaks (it replayed a factor of 0 from the trace before, leaving the statistics alone)."""
    results = []
    for compiled in (False, True):
        sf.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4, momentum=None))
        opt = sf.optim.SGD(model.parameters(), lr=0.1)
        x = sf.randn(8, 4)

        def step(x, model=model, opt=opt):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()

        run = sf.compile(step) if compiled else step
        for _ in range(3):
            run(x)
        results.append([model[1].running_mean.numpy().copy(),
                        model[1].running_var.numpy().copy()])
        if compiled:
            assert "momentum=None" in _reason(run)
    _assert_same(*results)


def test_create_graph_in_the_region_runs_eagerly_and_says_why():
    model, x, y = _mlp_and_data()

    def grad_penalty(x, y, model=model):
        loss = F.cross_entropy(model(x), y)
        (g,) = sf.autograd.grad(loss, [model[0].weight], create_graph=True)
        (loss + g.square().sum()).backward()

    run = sf.compile(grad_penalty)
    run(x, y)
    assert "create_graph=True" in _reason(run) and run.report().counts["eager"] == 1
    assert model[0].weight.grad is not None
