"""What a compiled call checks: a changed phase traces again, a new bucket plans, a new size
in a bucket only binds; each reason is in the report."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.compiler import ReplayError, mark_dynamic
from shapeflow.compiler.compiled import MAX_PLANS, MAX_PROGRAMS


def scale_add(x, y):
    return x * 2 + y


def _counts(c):
    return c.report().counts


def test_dtype_rank_and_python_values_are_guarded():
    c = sf.compile(scale_add)
    x = sf.randn(3, 4)
    np.testing.assert_array_equal(c(x, x).numpy(), scale_add(x, x).numpy())
    c(x, x)
    assert _counts(c)["traces"] == 1
    d = x.to(sf.float64)
    np.testing.assert_array_equal(c(d, d).numpy(), scale_add(d, d).numpy())
    assert _counts(c)["traces"] == 2
    v = sf.randn(4)
    np.testing.assert_array_equal(c(v, v).numpy(), scale_add(v, v).numpy())  # rank 1
    assert c(x, 1.5).tolist() == scale_add(x, 1.5).tolist()
    assert c(x, 2.5).tolist() == scale_add(x, 2.5).tolist()  # a new constant: traced again
    assert _counts(c)["traces"] == 5


def test_automatic_dynamic_traces_a_changed_dim_once():
    c = sf.compile(scale_add)  # dynamic=None: static first, dynamic after a size changes
    for n in (4, 5, 6, 7, 9, 30):
        x = sf.randn(n, 3)
        np.testing.assert_array_equal(c(x, x).numpy(), scale_add(x, x).numpy())
    rep = c.report()
    assert rep.counts["traces"] == 2  # static at 4, then B symbolic for every other size
    assert any(e.kind == "dynamic" and "4 -> 5" in e.detail for e in rep.events)
    assert "traced as B" in str(rep)


def test_dynamic_false_traces_each_shape_and_true_traces_once():
    static = sf.compile(scale_add, dynamic=False)
    dynamic = sf.compile(scale_add, dynamic=True)
    for n in (2, 3, 4):
        x = sf.randn(n, n + 1)
        static(x, x)
        dynamic(x, x)
    assert _counts(static)["traces"] == 3
    assert _counts(dynamic)["traces"] == 1


def test_mark_dynamic_names_the_dim_and_bounds_it():
    c = sf.compile(scale_add)
    x = sf.randn(8, 3)
    mark_dynamic(x, 0, min=2, max=64, name="N")
    c(x, x)
    c(sf.randn(20, 3), sf.randn(20, 3))
    assert _counts(c)["traces"] == 1
    assert "N in [2, 64]" in str(c.report())
    c(sf.randn(100, 3), sf.randn(100, 3))  # outside [2, 64]: static there, another trace
    assert _counts(c)["traces"] == 2
    with pytest.raises(ReplayError):
        mark_dynamic(x, 5)


def test_grad_mode_and_train_flag_are_guarded():
    model = sf.nn.Sequential(sf.nn.Linear(4, 4), sf.nn.Dropout(0.5))
    c = sf.compile(model)
    x = sf.randn(2, 4)
    out = c(x)  # grad recorded (a training forward): runs eagerly, says so
    assert out.requires_grad
    assert _counts(c)["eager"] == 1 and "training forward" in str(c.report())
    model.eval()
    with sf.no_grad():
        np.testing.assert_array_equal(c(x).numpy(), model(x).numpy())
        model.train()
        y = c(x)  # train mode: dropout zeroes some of it, in a new trace
    assert _counts(c)["traces"] == 2
    assert (y.numpy() == 0).any()


def test_buckets_given_and_powers_of_two():
    c = sf.compile(scale_add, dynamic="B", buckets={"B": [4, 16]})
    for n in (1, 3, 4, 5, 16, 17, 40):
        x = sf.randn(n, 2)
        c(x, x)
    rep = c.report()
    plans = [e.detail for e in rep.events if e.kind == "plan"]
    assert [p.split(":")[0] for p in plans] == [
        "B in [1, 4]", "B in [5, 16]", "B in [17, 32]", "B in [33, 64]"]
    assert rep.counts["traces"] == 1 and rep.counts["binds"] == 7


def test_thousand_lengths_stay_within_the_cache_bounds():
    c = sf.compile(scale_add, dynamic="B")
    with sf.no_grad():
        for n in range(1, 1001):
            x = sf.ones(n)
            assert c(x, x).shape == (n,)
    inner = getattr(c, "_compiled", c)
    assert len(inner.programs) <= MAX_PROGRAMS and len(inner.plans) <= MAX_PLANS
    assert _counts(c)["traces"] == 1


def test_unknown_backend_mode_and_bad_buckets_are_clear_errors():
    with pytest.raises(ReplayError, match="unknown backend"):
        sf.compile(scale_add, backend="tvm")
    with pytest.raises(ReplayError, match="unknown mode"):
        sf.compile(scale_add, mode="fastest")
    with pytest.raises(ReplayError, match="increasing"):
        sf.compile(scale_add, buckets={"B": [8, 4]})(sf.ones(2), sf.ones(2))
    for mode in ("default", "reduce-overhead", "max-autotune"):
        assert sf.compile(scale_add, mode=mode)(sf.ones(2), sf.ones(2)).tolist() == [3.0, 3.0]
    assert sf.compile(scale_add, backend="eager") is scale_add


def test_decorator_and_reset():
    @sf.compile(dynamic=True)
    def f(x):
        return x.relu() + 1

    assert f(sf.tensor([-1.0, 2.0])).tolist() == [1.0, 3.0]
    assert sf.compiler.explain(f).counts["traces"] == 1
    sf.compiler.reset()
    assert sf.compiler.explain(f).counts["traces"] == 0
    f(sf.tensor([-1.0, 2.0]))
    assert sf.compiler.explain(f).counts["traces"] == 1


def test_a_stream_of_lengths_traces_once_and_plans_per_bucket():
    """10,000 requests of log-normal lengths in [16, 2048]: one trace, a plan per power-of-two
    bucket touched (at most 8), and no trace again however many lengths it meets."""
    sf.manual_seed(0)
    model = sf.nn.Sequential(sf.nn.Embedding(16, 8), sf.nn.Linear(8, 4)).eval()
    compiled = sf.compile(model, dynamic="B,L")
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(mean=5.0, sigma=1.0, size=10_000), 16, 2048).astype(int)
    with sf.no_grad():
        for i, n in enumerate(lengths):
            ids = sf.randint(0, 16, (1, int(n)))
            out = compiled(ids)
            if i % 1000 == 0:
                np.testing.assert_array_equal(out.numpy(), model(ids).numpy())
    counts = compiled.report().counts
    touched = {(int(n) - 1).bit_length() for n in lengths}
    assert counts["traces"] == 1 and counts["breaks"] == 0 and counts["eager"] == 0
    assert counts["plans"] == len(touched) <= 8
    assert counts["replays"] == 10_000


def test_a_function_reads_the_modules_it_closes_over():
    model = sf.nn.Linear(3, 2)

    @sf.compile
    def f(x):
        return model(x).relu() * 2

    x = sf.randn(4, 3)
    with sf.no_grad():
        np.testing.assert_array_equal(f(x).numpy(), (model(x).relu() * 2).numpy())
        model.weight.mul_(-1)  # an optimizer-like step in place: the replay reads it
        np.testing.assert_array_equal(f(x).numpy(), (model(x).relu() * 2).numpy())
    assert sf.compiler.explain(f).counts["traces"] == 1
