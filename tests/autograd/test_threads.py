"""Mode state is per thread, as in PyTorch: grad mode, anomaly mode, module paths, observers.

Threads training their own models at once must give exactly what they give one after the
other; the switch interval is made tiny so the threads interleave between ops.
"""

import sys
import threading

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn
from shapeflow.autograd import grad_mode
from shapeflow.errors import ShapeError


@pytest.fixture(autouse=True)
def interleave():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_threads(fns) -> list:
    """Run each fn in its own thread, started together; their results, errors re-raised."""
    barrier = threading.Barrier(len(fns))
    results, errors = [None] * len(fns), []

    def body(i, fn):
        try:
            barrier.wait()
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001  (re-raised in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def make_job(seed: int, steps: int = 30):
    """A model built now (the global RNG is not shared while building) and its training."""
    sf.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.LayerNorm(16), nn.Linear(16, 3))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(seed)
    xs = [sf.tensor(rng.standard_normal((8, 6)).astype(np.float32)) for _ in range(steps)]
    ys = [sf.tensor(rng.integers(0, 3, 8)) for _ in range(steps)]

    def train():
        model.load_state_dict(state)
        opt = sf.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for x, y in zip(xs, ys):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in model.parameters()]

    return train


@pytest.mark.parametrize("n", [2, 4])
def test_threads_training_at_once_match_sequential_runs(n):
    jobs = [make_job(seed) for seed in range(n)]
    sequential = [job() for job in jobs]
    concurrent = run_threads(jobs)
    for (seq_losses, seq_params), (con_losses, con_params) in zip(sequential, concurrent):
        assert con_losses == seq_losses
        for a, b in zip(seq_params, con_params):
            np.testing.assert_array_equal(a, b)


def test_a_thread_evaluating_under_no_grad_leaves_training_alone():
    train = make_job(0)
    expected = train()
    sf.manual_seed(1)
    evaluated = nn.Linear(6, 6)
    x = sf.randn(4, 6)

    def evaluate():
        outs = []
        for _ in range(300):
            with sf.no_grad():
                out = evaluated(x)
            outs.append(out.requires_grad or out.grad_fn is not None)
        return outs

    (losses, params), flags = run_threads([train, evaluate])
    assert losses == expected[0]
    for a, b in zip(params, expected[1]):
        np.testing.assert_array_equal(a, b)
    assert not any(flags)  # and no_grad held in its own thread
    assert sf.is_grad_enabled()


def test_grad_mode_is_on_in_a_new_thread_and_each_thread_keeps_its_own():
    seen = {}
    with sf.no_grad(), torch.no_grad():
        run_threads([lambda: seen.update(sf=sf.is_grad_enabled(),
                                         torch=torch.is_grad_enabled())])
        assert not sf.is_grad_enabled()
    assert seen == {"sf": True, "torch": True}  # PyTorch's rule, and ours

    def leave_it_off():  # a thread that ends with grad mode off
        sf.set_grad_enabled(False)
        y = sf.ones(2, requires_grad=True) * 2
        return y.requires_grad

    away = grad_mode._away_count
    assert run_threads([leave_it_off, leave_it_off]) == [False, False]
    assert sf.is_grad_enabled()
    assert grad_mode._away_count == away  # the ended threads no longer count as away
    assert (sf.ones(2, requires_grad=True) * 2).grad_fn is not None


def test_an_error_in_one_thread_names_its_own_module():
    inside = threading.Barrier(2)
    release = threading.Event()

    class Waits(nn.Module):
        def forward(self, x):
            inside.wait()  # the other thread raises while this call is running
            release.wait(5)
            return x

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.slow = nn.Sequential(nn.Identity(), Waits())

        def forward(self, x):
            return self.slow(x)

    broken = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(3, 2))

    def fail():
        inside.wait()
        try:
            broken(sf.ones(2, 4))
        finally:
            release.set()

    results = {}

    def catch():
        try:
            fail()
        except ShapeError as e:
            results["err"] = e

    run_threads([lambda: Holder()(sf.ones(1)), catch])
    assert results["err"].module_path == "2"


def test_anomaly_mode_is_per_thread():
    entered, done = threading.Event(), threading.Event()

    def checked():
        with sf.detect_anomaly():
            entered.set()
            done.wait(5)
            with pytest.raises(sf.AnomalyError):
                sf.tensor([-1.0]).log()

    def unchecked():
        entered.wait(5)
        try:
            return sf.tensor([-1.0]).log().isnan().item()  # NaN, no error in this thread
        finally:
            done.set()

    assert run_threads([checked, unchecked])[1] is True
    assert not grad_mode.state.anomaly


def test_observers_see_only_their_own_threads_nodes():
    entered, done = threading.Event(), threading.Event()
    seen = []

    def observed():
        grad_mode.add_observer(lambda node, inputs, out: seen.append(node.name))
        try:
            entered.set()
            done.wait(5)
            (sf.ones(2, requires_grad=True) * 3).sum()
        finally:
            grad_mode.remove_observer(grad_mode.state.observers[0])

    def other():
        entered.wait(5)
        try:
            sf.ones(2, requires_grad=True).exp()
        finally:
            done.set()

    run_threads([observed, other])
    assert seen == ["mul", "sum"]
