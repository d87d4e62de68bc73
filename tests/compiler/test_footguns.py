"""Trace-and-replay's known footguns behave as eager, or raise ReplayError naming the line."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
import shapeflow.nn as nn
from shapeflow.compiler import ReplayError


def reads_item(x):
    if x.sum().item() > 0:  # data-dependent: a graph break
        return x * 2
    return x * 3


def branches_on_data(x):
    if (x > 0).all():
        return x + 1
    return x - 1


def to_numpy(x):
    return sf.tensor(x.numpy() * 2)


@pytest.mark.parametrize("fn", [reads_item, branches_on_data, to_numpy])
def test_data_dependent_code_runs_eagerly_and_says_where(fn):
    c = sf.compile(fn)
    for x in (sf.ones(3), -sf.ones(3)):
        np.testing.assert_array_equal(c(x).numpy(), fn(x).numpy())
    rep = c.report()
    assert rep.counts["breaks"] == 1 and rep.counts["replays"] == 0
    brk = next(e for e in rep.events if e.kind == "break")
    assert "test_footguns.py" in brk.line
    with pytest.raises(ReplayError, match="fullgraph") as err:
        sf.compile(fn, fullgraph=True)(sf.ones(3))
    assert "test_footguns.py" in str(err.value)


def test_kept_outputs_are_never_overwritten_and_input_changes_are_seen():
    c = sf.compile(lambda x: x * 2)
    x = sf.ones(3)
    first = c(x)
    x.add_(1)  # the input changed in place between calls
    second = c(x)
    assert first.tolist() == [2.0, 2.0, 2.0] and second.tolist() == [4.0, 4.0, 4.0]


def test_an_input_returned_or_viewed_is_the_input():
    c = sf.compile(lambda x: (x, x[1:]))
    x = sf.arange(4.0)
    a, b = c(x)
    a, b = c(x)
    x.add_(10)
    assert a.tolist() == x.tolist() and b.tolist() == x[1:].tolist()


def test_dropout_draws_anew_each_call():
    c = sf.compile(nn.Dropout(0.5))
    with sf.no_grad():
        draws = [c(sf.ones(200)).numpy() for _ in range(3)]
    assert not np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[1], draws[2])


def test_load_state_dict_between_calls_is_seen():
    model = nn.Linear(3, 2)
    c = sf.compile(model)
    x = sf.ones(1, 3)
    with sf.no_grad():
        before = c(x)
        other = nn.Linear(3, 2)
        c.load_state_dict({f"_orig_mod.{k}": v for k, v in other.state_dict().items()})
        after = c(x)
        np.testing.assert_array_equal(after.numpy(), other(x).numpy())
    assert not np.array_equal(before.numpy(), after.numpy())


def test_batch_norm_running_stats_in_train_mode_stay_eager_and_right():
    sf.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model.load_state_dict(eager.state_dict())
    c = sf.compile(model)
    x = sf.randn(8, 4)
    with sf.no_grad():
        for _ in range(3):
            np.testing.assert_array_equal(c(x).numpy(), eager(x).numpy())
    np.testing.assert_array_equal(model[1].running_mean.numpy(), eager[1].running_mean.numpy())
    assert int(model[1].num_batches_tracked.item()) == 3
    assert "changed outside an op" in str(c.report())
    model.eval()
    eager.eval()
    with sf.no_grad():  # eval: the running stats are inputs the replay reads
        np.testing.assert_array_equal(c(x).numpy(), eager(x).numpy())
        np.testing.assert_array_equal(c(x).numpy(), eager(x).numpy())
    assert c.report().counts["replays"] == 2


def test_a_parameter_replaced_by_another_size_is_seen():
    model = nn.Linear(3, 2)
    c = sf.compile(model)
    with sf.no_grad():
        c(sf.ones(1, 3))
        model.weight = nn.Parameter(sf.randn(5, 3))
        model.bias = nn.Parameter(sf.zeros(5))
        out = c(sf.ones(1, 3))
    assert out.shape == (1, 5)
    np.testing.assert_array_equal(out.numpy(), model(sf.ones(1, 3)).detach().numpy())


def test_steps_that_read_values_outside_ops_break_the_trace():
    """Embedding's max_norm renormalizes the rows it reads, in place: skipped on meta, it
    would be missing from every replay; the trace stops there and the call runs eagerly."""
    sf.manual_seed(0)
    eager = nn.Embedding(10, 4, max_norm=0.5)
    model = nn.Embedding(10, 4, max_norm=0.5)
    model.load_state_dict(eager.state_dict())
    c = sf.compile(model)
    with sf.no_grad():
        for ids in (sf.tensor([[1, 2]]), sf.tensor([[3, 4]])):
            np.testing.assert_array_equal(c(ids).numpy(), eager(ids).numpy())
    np.testing.assert_array_equal(model.weight.detach().numpy(), eager.weight.detach().numpy())
    assert "max_norm renormalization reads the values" in str(c.report())

    def nll(x, var):
        return sf.nn.functional.gaussian_nll_loss(x, sf.zeros(3), var)

    with pytest.raises(sf.ShapeError, match="negative"):  # the check still runs: eagerly
        sf.compile(nll)(sf.ones(3), -sf.ones(3))


_SEEN: list = []


class _Probe(nn.Module):
    """Notes, from inside its forward, where the module compiled (the original) keeps its
    weight: another thread running the original meanwhile must find it on cpu."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        _SEEN.append(str(_PROBE[0].lin.weight.device))
        return self.lin(x)


_PROBE: list = []


def test_tracing_a_module_leaves_the_module_itself_alone():
    _PROBE[:] = [_Probe()]
    _SEEN.clear()
    c = sf.compile(_PROBE[0])
    with sf.no_grad():
        x = sf.ones(1, 2)
        np.testing.assert_array_equal(c(x).numpy(), _PROBE[0](x).numpy())
    assert c.report().counts["traces"] == 1
    assert _SEEN and set(_SEEN) == {"cpu"}  # the trace ran a meta copy, not the module
