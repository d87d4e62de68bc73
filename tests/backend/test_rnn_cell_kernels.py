"""rnn_cell_kernels.c: its float64 activations at their edges (against NumPy's libm and
PyTorch), NaN and inf through a whole step on every path, and the stale-build refusal."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.backend.cpu import rnn_cell_kernels as rk
from shapeflow.ops.nn.lstm_cell import lstm_cell

needs_kernels = pytest.mark.skipif(not rk.available(), reason="LSTM cell kernels not built")

EDGES = np.array([0.0, 1e-300, -1e-300, 5e-324, 1e-8, -1e-8, 0.3, -0.3, 0.6249999, -0.6249999,
                  0.625, -0.625, 0.7, -0.7, 1.0, -1.0, 5.0, -5.0, 19.0, -19.0, 40.0, -40.0,
                  700.0, -700.0, 708.5, -708.5, 709.9, -709.9, 745.0, -745.0, 746.0, -746.0,
                  1e300, -1e300, np.inf, -np.inf])
GRID = np.concatenate([EDGES, np.linspace(-30, 30, 60001)])


def ulps(got, want):
    """Largest distance in units of the last place of `want` (ties at 0 count as 0)."""
    scale = np.spacing(np.abs(want))
    return np.max(np.abs(got - want) / np.maximum(scale, np.finfo(np.float64).smallest_subnormal))


@needs_kernels
def test_float64_activations_are_within_two_ulp():
    tanh = rk.activation("tanh", GRID)
    sig = rk.activation("sigmoid", GRID)
    assert ulps(tanh, np.tanh(GRID)) <= 2
    e = np.exp(-np.abs(GRID))
    want = np.where(GRID >= 0, 1 / (1 + e), e / (1 + e))  # no cancellation on either side
    assert ulps(sig, want) <= 3
    normal = np.abs(GRID) <= 700  # below, PyTorch's 1 / (1 + exp(-x)) overflows to 0
    ts = torch.sigmoid(torch.tensor(GRID)).numpy()
    assert ulps(sig[normal], ts[normal]) <= 5
    assert np.all(sig[~normal & (GRID < 0)] < 1e-300)
    assert np.all((sig >= 0) & (sig <= 1)) and np.all(np.abs(tanh) <= 1)
    pos, neg = np.isposinf(GRID), np.isneginf(GRID)
    assert tanh[pos] == 1 and tanh[neg] == -1 and sig[pos] == 1 and sig[neg] == 0
    nan = rk.activation("tanh", np.array([np.nan])), rk.activation("sigmoid", np.array([np.nan]))
    assert np.isnan(nan[0]).all() and np.isnan(nan[1]).all()


@pytest.mark.parametrize("kind", ["numpy", "pointwise", "fused"])
def test_nan_and_inf_land_where_numpy_puts_them(kind):
    if kind != "numpy" and not rk.available():
        pytest.skip("LSTM cell kernels not built")
    x = np.zeros((4, 1))
    x[1, 0], x[2, 0], x[3, 0] = np.nan, np.inf, -np.inf
    w_ih = np.ones((8, 1))
    w_hh = np.zeros((8, 2))
    old = rk.set_enabled(kind != "numpy", use_gemm=kind == "fused")
    try:
        out = lstm_cell(sf.tensor(x), sf.zeros(4, 2, dtype=sf.float64),
                        sf.zeros(4, 2, dtype=sf.float64), sf.tensor(w_ih),
                        sf.tensor(w_hh)).numpy()
    finally:
        rk.set_enabled(old)
    h, c = out[0], out[1]
    assert np.isnan(h[1]).all() and np.isnan(c[1]).all()
    np.testing.assert_allclose(c[2], 1.0)  # i = g = 1, f c = 0
    np.testing.assert_allclose(h[2], np.tanh(1.0))
    np.testing.assert_array_equal(np.abs(c[3]), 0.0)  # i = 0, g = -1
    np.testing.assert_allclose(c[0], 0.0)


@needs_kernels
def test_a_library_from_another_source_is_refused(tmp_path, monkeypatch):
    other = tmp_path / "rnn_cell_kernels.c"
    other.write_text("/* another version */\n")
    monkeypatch.setattr(rk, "_FILE", str(other))
    monkeypatch.setitem(rk._state, "loaded", False)
    monkeypatch.setitem(rk._state, "lib", None)
    rk._steps.clear()
    try:
        assert not rk.available()
        assert "another rnn_cell_kernels.c" in rk._state["refused"]
        assert rk.step(np.dtype(np.float64)) is None
    finally:
        monkeypatch.undo()
        rk._state.update(loaded=False, lib=None, refused=None)
        rk._steps.clear()
    assert rk.available()
