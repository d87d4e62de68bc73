"""The fast engine (run_backward) against its plain twin (reference_backward): equal gradients.

Each graph is built twice from the same values; one copy runs through each engine and every
leaf's .grad (or captured gradient) must match exactly. Also: backward notes no graph breaks.
"""

import numpy as np
import pytest

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.autograd import breaks, engine


def _leaves(seed: int, *shapes):
    rng = np.random.default_rng(seed)
    return [sf.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
            for s in shapes]


def _diamond(x, w):
    h = x @ w
    return ((h.relu() * h.exp()) + h.tanh()).sum()


def _shared(a, b):
    return (a * b + a.sin() * a + (b @ b.T).sum(0).reshape(3, 1)).mean()


def _broadcast(a, b, c):
    return ((a + b) * c).sum() + (a * b.exp()).amax()


def _views(x, w):
    parts = (x @ w).split(1, dim=1)  # split's views: the fast engine's in-place path
    return sum((p * (i + 1)).sum() for i, p in enumerate(parts)) + x[1:, :2].pow(2).sum()


GRAPHS = {
    "diamond": (_diamond, [(4, 5), (5, 3)]),
    "shared leaves": (_shared, [(3, 3), (3, 3)]),
    "broadcast": (_broadcast, [(4, 3), (3,), (2, 1, 1)]),
    "views": (_views, [(4, 5), (5, 3)]),
}


def _run(walk, loss, **kw):
    roots = engine._roots_and_grads([loss], None, "backward")
    return walk(roots, kw.pop("retain_graph", False), kw.pop("create_graph", False), **kw)


def _assert_same(xs, ys):
    for x, y in zip(xs, ys):
        assert x.dtype is y.dtype and x.shape == y.shape
        assert np.array_equal(x.numpy(), y.numpy())


@pytest.mark.parametrize("name", list(GRAPHS))
def test_fast_engine_matches_the_reference(name):
    fn, shapes = GRAPHS[name]
    fast, ref = _leaves(0, *shapes), _leaves(0, *shapes)
    _run(engine.run_backward, fn(*fast))
    _run(engine.reference_backward, fn(*ref))
    _assert_same([t.grad for t in fast], [t.grad for t in ref])


@pytest.mark.parametrize("name", list(GRAPHS))
def test_retain_graph_and_accumulation_match(name):
    fn, shapes = GRAPHS[name]
    grads = []
    for walk in (engine.run_backward, engine.reference_backward):
        leaves = _leaves(1, *shapes)
        loss = fn(*leaves)
        _run(walk, loss, retain_graph=True)
        _run(walk, loss)  # the second pass adds into .grad
        grads.append([t.grad for t in leaves])
    _assert_same(*grads)


def test_grad_of_grad_matches():
    results = []
    for walk in (engine.run_backward, engine.reference_backward):
        x, w = _leaves(2, (3, 4), (4, 2))
        (gx,) = _run(walk, _diamond(x, w), retain_graph=True, create_graph=True,
                     capture=[x], accumulate=False)
        assert gx.requires_grad
        _run(walk, (gx * gx).sum())
        results.append([gx.detach(), x.grad, w.grad])
    _assert_same(*results)


def test_hooks_match():
    results = []
    for walk in (engine.run_backward, engine.reference_backward):
        x, w = _leaves(3, (4, 5), (5, 3))
        seen = []
        x.register_hook(lambda g: g * 2)
        w.register_post_accumulate_grad_hook(
            lambda p, seen=seen: seen.append(p.grad.numpy().copy()))
        h = x @ w
        h.register_hook(lambda g: g + 1)
        _run(walk, (h * h).sum())
        assert len(seen) == 1
        results.append([x.grad, w.grad, sf.tensor(seen[0])])
    _assert_same(*results)


def test_bfloat16_sums_match():
    results = []
    for walk in (engine.run_backward, engine.reference_backward):
        a, b = (t.detach().to(sf.bfloat16).requires_grad_() for t in _leaves(4, (6, 8), (8,)))
        loss = ((a * b) + a + (a * a) + b).sum()
        _run(walk, loss)
        results.append([a.grad, b.grad])
    _assert_same(*results)


def test_a_training_step_notes_no_breaks():
    sf.manual_seed(0)
    model = sf.nn.Sequential(sf.nn.Linear(8, 16), sf.nn.LayerNorm(16), sf.nn.GELU(),
                             sf.nn.Linear(16, 4))
    opt = sf.optim.SGD(model.parameters(), lr=0.1)
    x, y = sf.randn(5, 8), sf.tensor([0, 1, 2, 3, 0])
    loss = F.cross_entropy(model(x), y)
    mark = breaks.count()
    before = list(breaks.log)
    loss.backward()
    opt.step()
    assert breaks.count() == mark and list(breaks.log) == before


def test_backward_mutes_only_while_it_runs():
    x = sf.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    mark = breaks.count()
    x.detach()  # a user's break after backward is noted again
    assert breaks.count() == mark + 1 and breaks.log[-1][0] == "detach"


def test_the_engine_computes_through_the_device():
    """No NumPy and no backend in the engine: sums go through the gradient's device."""
    import ast
    import inspect as pyinspect

    tree = ast.parse(pyinspect.getsource(engine))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in names if m.split(".")[0] in ("numpy", "backend")], names
