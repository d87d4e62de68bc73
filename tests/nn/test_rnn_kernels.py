"""The compiled LSTM/GRU cell kernels (float32): both paths (kernels on, NumPy alone) against
PyTorch in float64, over odd hidden sizes, batch 1, both directions, projections and packed
sequences of decreasing length; the activations at their edges; NaN and inf where NumPy's."""

import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.nn.utils import rnn as srnn
from shapeflow.ops.nn import recurrent_cells
from tests.backend.kernel_paths import both_paths

needs_kernels = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")



def twins(mode, *args, **kw):
    """A float64 PyTorch layer (the oracle) and a float32 shapeflow one with its weights."""
    torch.manual_seed(0)
    t = getattr(torch.nn, mode)(*args, **kw).double()
    sd = {k: sf.tensor(v.detach().numpy().astype(np.float32)) for k, v in t.state_dict().items()}
    s = getattr(sf.nn, mode)(*args, **kw)
    s.load_state_dict(sd)
    return t, s


def as_np(t):
    return t.detach().numpy()


CASES = [  # mode, hidden, batch, bidirectional, proj, lengths (None: padded, all of L)
    ("LSTM", 17, 3, False, 0, None),
    ("LSTM", 5, 1, True, 0, None),
    ("LSTM", 16, 4, True, 3, None),
    ("LSTM", 33, 4, True, 0, [6, 4, 4, 1]),
    ("LSTM", 7, 4, False, 0, [3, 6, 1, 4]),
    ("GRU", 17, 3, True, 0, None),
    ("GRU", 5, 1, False, 0, None),
    ("GRU", 33, 4, True, 0, [6, 4, 4, 1]),
    ("GRU", 9, 4, True, 0, [3, 6, 1, 4]),
]


@needs_kernels
@pytest.mark.parametrize("mode,hidden,batch,bi,proj,lengths", CASES)
def test_both_paths_match_torch(mode, hidden, batch, bi, proj, lengths, rng):
    kw = dict(num_layers=2, bidirectional=bi, batch_first=True)
    if proj:
        kw["proj_size"] = proj
    t, s = twins(mode, 5, hidden, **kw)
    x = (rng.standard_normal((batch, 6, 5)) * 1.5).astype(np.float32)
    n, p = 2 * (2 if bi else 1), proj or hidden
    h0 = (rng.standard_normal((n, batch, p)) * 0.5).astype(np.float32)
    c0 = (rng.standard_normal((n, batch, hidden)) * 0.5).astype(np.float32)
    weight = rng.standard_normal((batch, 6, p * (2 if bi else 1))).astype(np.float32)

    def loss(model, xt, h0t, c0t, lib):
        if lengths is not None:
            xt = lib.pack_padded_sequence(xt, lengths, batch_first=True,
                                          enforce_sorted=lengths == sorted(lengths)[::-1])
        state = (h0t, c0t) if mode == "LSTM" else h0t
        out, hn = model(xt, state)
        if lengths is not None:
            out = lib.pad_packed_sequence(out, batch_first=True, total_length=6)[0]
        hn = [hn[0], hn[1] * 2] if mode == "LSTM" else [hn]
        return out, (out * out * weight).sum() + sum((a * a).sum() for a in hn)

    def run():
        leaves = [sf.tensor(a, requires_grad=True) for a in (x, h0, c0)]
        s.zero_grad()
        out, total = loss(s, *leaves, srnn)
        total.backward()
        grads = [a.grad.numpy() for a in leaves[:2 if mode == "GRU" else 3]]
        return [out.detach().numpy()] + grads + [p.grad.numpy() for p in s.parameters()]

    fused, ref = both_paths(run)
    leaves = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, h0, c0)]
    weight = torch.tensor(weight.astype(np.float64))
    out, total = loss(t, *leaves, trnn)
    total.backward()
    oracle = [as_np(out)] + [a.grad.numpy() for a in leaves[:2 if mode == "GRU" else 3]]
    oracle += [p.grad.numpy() for p in t.parameters()]
    for f, r, o in zip(fused, ref, oracle):
        assert f.dtype == np.float32 and f.shape == o.shape
        scale = max(1.0, float(np.abs(o).max()))
        np.testing.assert_allclose(f, o, rtol=1e-4, atol=2e-5 * scale)
        np.testing.assert_allclose(r, o, rtol=1e-4, atol=2e-5 * scale)
        np.testing.assert_allclose(f, r, rtol=1e-4, atol=1e-5 * scale)


@needs_kernels
def test_float32_layers_take_the_compiled_loop(monkeypatch):
    calls = []
    for name in ("lstm_forward", "lstm_backward", "gru_forward", "gru_backward"):
        fn = getattr(recurrent_cells, name)
        monkeypatch.setattr(recurrent_cells, name,
                            lambda *a, _fn=fn, _n=name: calls.append(_n) or _fn(*a))
    for mode in ("LSTM", "GRU"):
        out = getattr(sf.nn, mode)(3, 5)(sf.randn(4, 2, 3, requires_grad=True))[0]
        out.sum().backward()
    assert calls == ["lstm_forward", "lstm_backward", "gru_forward", "gru_backward"]
    calls.clear()
    sf.nn.LSTM(3, 5).double()(sf.randn(4, 2, 3, dtype=sf.float64))  # float64: NumPy's loop
    assert calls == []


EDGES = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 0.3, -0.3, 0.62499, -0.62499, 0.625,
                  -0.625, 0.63, -0.63, 1.0, -1.0, 2.5, -2.5, 8.0, -8.0, 9.5, -9.5, 15.0, -15.0,
                  20.0, -20.0, 40.0, -40.0, 87.0, -87.0, 88.5, -88.5, 1e4, -1e4, 3e38, -3e38],
                 np.float32)
GRID = np.concatenate([EDGES, np.linspace(-12, 12, 4801, dtype=np.float32)])


def one_step(mode, v):
    """One step from zero states with every gate's pre-activation equal to v (a [B] array):
    (h, grad of h.sum() by v) in float32 from shapeflow."""
    m = getattr(sf.nn, mode)(1, 1)
    m.load_state_dict({k: sf.ones(*v.shape) if k == "weight_ih_l0" else sf.zeros(*v.shape)
                       for k, v in m.state_dict().items()})
    x = sf.tensor(v.reshape(1, -1, 1), requires_grad=True)
    out = m(x)[0]
    out.sum().backward()
    return out.detach().numpy().ravel(), x.grad.numpy().ravel()


def ref_step(mode, v):
    """The same step in float64 by the formulas (i = f = o = z = r = sigmoid(v))."""
    x = torch.tensor(v.astype(np.float64), requires_grad=True)
    s, g = torch.sigmoid(x), torch.tanh(x)
    h = s * torch.tanh(s * g) if mode == "LSTM" else g * (1 - s)
    h.sum().backward()
    return as_np(h), x.grad.numpy()


@needs_kernels
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_activations_are_accurate_at_their_edges(mode):
    (h, dv), (h_np, dv_np) = both_paths(lambda: one_step(mode, GRID))
    h_ref, dv_ref = ref_step(mode, GRID)
    # a few float32 ulps (the GRU's n - n z, as PyTorch's, loses ulps of n where z nears 1)
    atol = 1e-37 if mode == "LSTM" else 2e-7
    np.testing.assert_allclose(h, h_ref, rtol=1e-6, atol=atol)
    # the derivatives come from the saved float32 activations (s - s^2, as PyTorch's): an
    # absolute error of about one ulp of 1 where s is near 1
    np.testing.assert_allclose(dv, dv_ref, rtol=2e-5, atol=3e-7)
    np.testing.assert_allclose(h_np, h_ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dv, dv_np, rtol=1e-4, atol=3e-7)


@needs_kernels
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_nan_and_inf_land_where_numpy_puts_them(mode):
    v = np.array([np.nan, np.inf, -np.inf, 1.0, np.nan], np.float32)
    with np.errstate(all="ignore"):
        (h, dv), (h_np, dv_np) = both_paths(lambda: one_step(mode, v))
    for a, b in ((h, h_np), (dv, dv_np)):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        ok = ~np.isnan(b)
        np.testing.assert_allclose(a[ok], b[ok], rtol=1e-6, atol=1e-7)
    assert np.isnan(h[[0, 4]]).all() and np.isfinite(h[1:4]).all()


@needs_kernels
def test_long_sequence_and_reverse_batch_one(rng):
    t, s = twins("LSTM", 4, 19, bidirectional=True)
    x = rng.standard_normal((300, 1, 4)).astype(np.float32)
    sx = sf.tensor(x, requires_grad=True)
    so, (sh, sc) = s(sx)
    (so.sum() + sc.sum()).backward()
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    to, (th, tc) = t(tx)
    (to.sum() + tc.sum()).backward()
    np.testing.assert_allclose(so.detach().numpy(), as_np(to), rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("trans", [False, True])
def test_packed_weight_products_equal_plain_ones(trans, rng):
    from shapeflow.backend.cpu.gemm_packed import Packed

    w = rng.standard_normal((96, 64)).astype(np.float32)
    b = w.T if trans else w  # [64, 96] or [96, 64]
    k, n = b.shape
    pk = Packed(b, 8)
    for rows in (8, 5):  # the packed row count, and another (the plain gemm)
        a = rng.standard_normal((rows, k)).astype(np.float32)
        out = np.ones((rows + 2, n), np.float32)
        pk.acc(a, out[1:rows + 1])
        np.testing.assert_allclose(out[1:rows + 1], 1 + a.astype(np.float64) @ b, rtol=1e-5,
                                   atol=1e-5)
        assert (out[0] == 1).all() and (out[-1] == 1).all()
