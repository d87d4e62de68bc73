"""Every compiled kernel agrees with its NumPy path on NaN, +-inf, extremes and empty inputs.

One grid of special rows runs through each kernel's op with the kernels on and off; NaN must
sit where NumPy's NaN sits and every other value must match (inf included).
"""

from __future__ import annotations

import os
from importlib.util import find_spec

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.nn import functional as F
from shapeflow.ops.nn.softmax import _softmax_rows
from tests.backend.kernel_paths import both_paths

needs_kernels = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")

NAN, INF = np.nan, np.inf
BASE = [0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
SPECIALS = [NAN, INF, -INF, 0.0, -0.0, 1e-40, 3e38, -3e38, 88.0, -88.0, 1e4]


def grid() -> np.ndarray:
    """Rows of 6: one special in a normal row (first and last place), pairs, uniform rows."""
    rows = []
    for s in SPECIALS:
        rows.append([s] + BASE[1:])
        rows.append(BASE[:-1] + [s])
    for a, b in [(INF, -INF), (NAN, INF), (NAN, -INF), (INF, INF), (3e38, 3e38),
                 (-3e38, 3e38)]:
        rows.append([a, b] + BASE[2:])
    for s in (NAN, INF, -INF, 0.0, 3e38, -1e4):
        rows.append([s] * 6)
    return np.array(rows, np.float32)


GRID = grid()
SHAPES = {"grid": GRID, "empty rows": np.zeros((0, 6), np.float32)}



def assert_agree(fused, ref, rtol=2e-5, atol=2e-6):
    for f, r in zip(fused, ref):
        f, r = np.asarray(f), np.asarray(r)
        assert f.shape == r.shape and f.dtype == r.dtype
        np.testing.assert_array_equal(np.isnan(f), np.isnan(r))  # NaN exactly where NumPy's
        ok = ~np.isnan(r)
        np.testing.assert_allclose(f[ok], r[ok], rtol=rtol, atol=atol)


def quiet(fn):
    def run():
        with np.errstate(all="ignore"):
            return fn()
    return run


@needs_kernels
@pytest.mark.parametrize("which", list(SHAPES))
@pytest.mark.parametrize("approximate", ["none"])
def test_gelu_table_kernel(which, approximate):
    a = SHAPES[which]

    def run():
        x = sf.tensor(a, requires_grad=True)
        y = F.gelu(x, approximate=approximate)
        y.backward(sf.ones(*a.shape))
        return y.detach().numpy(), x.grad.numpy()

    assert_agree(*both_paths(quiet(run)))


@needs_kernels
@pytest.mark.parametrize("which", list(SHAPES))
@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm_kernels(which, rms):
    a = SHAPES[which]
    n = a.shape[1]
    w0 = np.linspace(0.5, 1.5, n, dtype=np.float32)

    def run():
        x = sf.tensor(a, requires_grad=True)
        w = sf.tensor(w0, requires_grad=True)
        y = F.rms_norm(x, (n,), w) if rms else F.layer_norm(x, (n,), w)
        y.backward(sf.ones(*a.shape))
        return y.detach().numpy(), x.grad.numpy(), w.grad.numpy()

    # float32 row statistics in another order: extremes (3e38) lose more than rounding
    assert_agree(*both_paths(quiet(run)), rtol=1e-3, atol=1e-3)


@needs_kernels
@pytest.mark.parametrize("which", list(SHAPES))
@pytest.mark.parametrize("opt", ["adam", "amsgrad", "sgd_momentum"])
def test_optimizer_kernels(which, opt):
    """adam_f32 and axpy_f32: specials in the parameters and in the gradients."""
    a = SHAPES[which]
    g0 = a[::-1].copy()

    def run():
        p = sf.nn.Parameter(sf.tensor(a.copy()))
        if opt == "sgd_momentum":
            o = sf.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
        else:
            o = sf.optim.Adam([p], lr=1e-2, amsgrad=opt == "amsgrad")
        for _ in range(2):
            p.grad = sf.tensor(g0)
            o.step()
        return [p.detach().numpy()] + [v.numpy() for v in o.state[p].values()
                                       if hasattr(v, "numpy") and v.shape == p.shape]

    assert_agree(*both_paths(quiet(run)), rtol=0, atol=0)


@needs_kernels
@pytest.mark.parametrize("which", list(SHAPES))
def test_softmax_backward_kernel(which):
    a = SHAPES[which]
    g = np.cos(np.arange(a.size, dtype=np.float32)).reshape(a.shape)

    def run():
        x = sf.tensor(a, requires_grad=True)
        y = F.softmax(x, -1)
        y.backward(sf.tensor(g))
        return y.detach().numpy(), x.grad.numpy()

    assert_agree(*both_paths(quiet(run)))


@needs_kernels
@pytest.mark.parametrize("zero_empty", [False, True])
def test_softmax_rows_kernel_against_numpy_rows(zero_empty):
    """softmax_rows_f32 against the NumPy row softmax it replaces, on every grid row."""
    fused = GRID.copy()
    assert kernels.softmax_rows(fused, 1.0, 0, zero_empty)
    ref = GRID.copy()
    with np.errstate(all="ignore"):
        _softmax_rows(ref, ref, False, zero_empty=zero_empty)
    assert_agree([fused], [ref], rtol=1e-5, atol=1e-7)


@needs_kernels
@pytest.mark.parametrize("causal", [False, True])
def test_attention_softmax_kernel(causal):
    """Specials in the queries reach the scores (NaN and inf rows) through the fused path."""
    q0 = GRID[None, None, :6]
    k0 = np.linspace(-1, 1, 36, dtype=np.float32).reshape(1, 1, 6, 6)
    v0 = np.linspace(0, 2, 36, dtype=np.float32).reshape(1, 1, 6, 6)

    def run():
        q = sf.tensor(q0)
        return [F.scaled_dot_product_attention(q, sf.tensor(k0), sf.tensor(v0),
                                               is_causal=causal).numpy()]

    assert_agree(*both_paths(quiet(run)), rtol=1e-4, atol=1e-6)


@needs_kernels
@pytest.mark.parametrize("which", list(SHAPES))
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("row", ["all", "one"])
def test_cross_entropy_kernels(which, reduction, row):
    """Forward and backward, over the whole grid or one special row at a time (a NaN logit
    must make the loss NaN, as PyTorch and the NumPy path give, not be skipped)."""
    a = SHAPES[which]
    rows = [a] if row == "all" or not len(a) else [a[i:i + 1] for i in range(len(a))]
    for x0 in rows:
        t0 = np.arange(len(x0)) % x0.shape[1]

        def run(x0=x0, t0=t0):
            x = sf.tensor(x0, requires_grad=True)
            loss = F.cross_entropy(x, sf.tensor(t0), reduction=reduction)
            loss.backward()
            return loss.detach().numpy(), x.grad.numpy()

        assert_agree(*both_paths(quiet(run)), rtol=1e-4, atol=1e-6)


@needs_kernels
def test_cross_entropy_nan_logit_is_nan_as_torch():
    """The regression: one NaN logit off the target gave a finite loss on the kernel path."""
    torch = pytest.importorskip("torch")
    x0 = np.array([[np.nan, 1.0, 2.0], [0.0, 1.0, 2.0]], np.float32)
    t0 = np.array([1, 0])
    x = sf.tensor(x0, requires_grad=True)
    loss = F.cross_entropy(x, sf.tensor(t0))
    loss.backward()
    tx = torch.tensor(x0, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t0))
    tl.backward()
    assert np.isnan(loss.item()) and np.isnan(tl.item())
    np.testing.assert_array_equal(np.isnan(x.grad.numpy()), np.isnan(tx.grad.numpy()))


@needs_kernels
def test_a_library_built_from_another_source_is_refused(monkeypatch):
    """Same kernel names, other semantics: a stale build falls back to NumPy."""
    monkeypatch.setattr(kernels, "_state", {"lib": None, "loaded": False, "enabled": True})
    monkeypatch.setattr(kernels, "source_digest", lambda: "0" * 64)
    assert kernels._load() is None
    assert "another kernels.c" in kernels._state["refused"]


@pytest.mark.skipif(os.environ.get("SHAPEFLOW_KERNELS") == "0", reason="kernels turned off")
def test_the_library_in_use_was_built_from_this_source():
    """A kernels.c edited without a rebuild fails here (the loader refuses the stale library,
    so the kernel tests above would only skip): rebuild with `pip install -e .`, `make test`
    or `python setup.py build_ext --inplace`."""
    if kernels.source_digest() is None or find_spec("shapeflow.backend.cpu._kernels") is None:
        pytest.skip("installed without kernels.c, or built without a C compiler")
    old = kernels.set_enabled(True)
    try:
        assert kernels.available(), f"compiled kernels refused: {kernels._state['refused']}"
    finally:
        kernels.set_enabled(old)
