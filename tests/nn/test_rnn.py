"""RNN, LSTM, GRU and their cells against PyTorch (state_dict loaded one to one): outputs,
final states and every gradient, over the option grid; packing; long sequences; meta; errors."""

import itertools

import numpy as np
import pytest
import torch
from torch.nn.utils import rnn as trnn

import shapeflow as sf
from shapeflow.autograd import gradcheck
from shapeflow.errors import GraphError, ShapeError
from shapeflow.nn.utils import rnn as srnn
from shapeflow.ops import base

rng = np.random.default_rng(0)


def twin_of(name, *args, dtype=torch.float64, **kw):
    """A PyTorch layer and a shapeflow one with its state_dict, loaded key by key."""
    torch.manual_seed(0)
    t = getattr(torch.nn, name)(*args, **kw).to(dtype)
    s = getattr(sf.nn, name)(*args, **kw)
    s = s.double() if dtype is torch.float64 else s
    sd = {k: sf.tensor(v.detach().numpy().copy()) for k, v in t.state_dict().items()}
    assert list(sd) == list(s.state_dict())  # same names, same order
    s.load_state_dict(sd)
    return t, s


def leaf(a):
    return torch.tensor(a, requires_grad=True), sf.tensor(a, requires_grad=True)


def close(a, b, tol):
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else a
    b = b.detach().numpy() if isinstance(b, sf.Tensor) else b
    np.testing.assert_allclose(b, a, rtol=tol, atol=tol)


def check_grads(t, s, pairs, tol):
    for tp, sp in pairs:
        close(tp.grad, sp.grad, tol)
    for n, p in t.named_parameters():
        close(p.grad, getattr(s, n).grad, tol)


GRID = [(mode, layers, bi, bf, bias, proj)
        for mode, layers, bi, bf, bias in itertools.product(
            ["RNN", "LSTM", "GRU"], [1, 2], [False, True], [False, True], [True, False])
        for proj in ([0, 3] if mode == "LSTM" else [0])]


@pytest.mark.parametrize("mode,layers,bi,bf,bias,proj", GRID)
def test_layer_matches_torch(mode, layers, bi, bf, bias, proj):
    kw = dict(num_layers=layers, bidirectional=bi, batch_first=bf, bias=bias)
    if proj:
        kw["proj_size"] = proj
    t, s = twin_of(mode, 5, 6, **kw)
    n, p = layers * (2 if bi else 1), proj or 6
    tx, sx = leaf(rng.standard_normal((4, 7, 5) if bf else (7, 4, 5)))
    th0, sh0 = leaf(rng.standard_normal((n, 4, p)))
    pairs = [(tx, sx), (th0, sh0)]
    if mode == "LSTM":
        tc0, sc0 = leaf(rng.standard_normal((n, 4, 6)))
        pairs.append((tc0, sc0))
        to, (th, tc) = t(tx, (th0, tc0))
        so, (sh, sc) = s(sx, (sh0, sc0))
        close(tc, sc, 1e-10)
        tl, sl = (tc * 2).sum() + th.sum(), (sc * 2).sum() + sh.sum()
    else:
        to, th = t(tx, th0)
        so, sh = s(sx, sh0)
        tl, sl = th.sum(), sh.sum()
    close(to, so, 1e-10)
    close(th, sh, 1e-10)
    (tl + (to * to).sum()).backward()
    (sl + (so * so).sum()).backward()
    check_grads(t, s, pairs, 1e-9)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_float32_default_init_and_zero_states(mode):
    t, s = twin_of(mode, 8, 16, num_layers=2, dtype=torch.float32)
    tx, sx = leaf(rng.standard_normal((9, 3, 8)).astype(np.float32))
    to, so = t(tx)[0], s(sx)[0]
    close(to, so, 1e-5)
    to.sum().backward()
    so.sum().backward()
    check_grads(t, s, [(tx, sx)], 1e-4)
    assert so.dtype is sf.float32


def test_rnn_relu_nonlinearity():
    t, s = twin_of("RNN", 3, 4, nonlinearity="relu", num_layers=2)
    tx, sx = leaf(rng.standard_normal((5, 2, 3)))
    to, so = t(tx)[0], s(sx)[0]
    close(to, so, 1e-10)
    to.sum().backward()
    so.sum().backward()
    check_grads(t, s, [(tx, sx)], 1e-10)


@pytest.mark.parametrize("mode,bi,proj", [("LSTM", True, 0), ("LSTM", False, 0),
                                          ("GRU", True, 0), ("RNN", False, 0)])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences_match_torch(mode, bi, proj, enforce_sorted):
    kw = dict(num_layers=2, bidirectional=bi, batch_first=True)
    if proj:
        kw["proj_size"] = proj
    t, s = twin_of(mode, 5, 6, **kw)
    lens = [6, 4, 4, 1] if enforce_sorted else [3, 6, 1, 4]
    tx, sx = leaf(rng.standard_normal((4, 6, 5)))
    n = 2 * (2 if bi else 1)
    th0, sh0 = leaf(rng.standard_normal((n, 4, proj or 6)))
    tp = trnn.pack_padded_sequence(tx, lens, batch_first=True, enforce_sorted=enforce_sorted)
    sp = srnn.pack_padded_sequence(sx, lens, batch_first=True, enforce_sorted=enforce_sorted)
    close(tp.data, sp.data, 0)
    assert tp.batch_sizes.tolist() == sp.batch_sizes.tolist()
    if mode == "LSTM":
        thx, shx = (th0, th0 * 0.5), (sh0, sh0 * 0.5)
    else:
        thx, shx = th0, sh0
    to, th = t(tp, thx)
    so, sh = s(sp, shx)
    assert isinstance(so, srnn.PackedSequence)
    if mode == "LSTM":
        th, sh = th[0] * 2 + th[1], sh[0] * 2 + sh[1]
    to, tl = trnn.pad_packed_sequence(to, batch_first=True, total_length=8)
    so, sl = srnn.pad_packed_sequence(so, batch_first=True, total_length=8)
    assert tl.tolist() == sl.tolist()
    close(to, so, 1e-10)
    close(th, sh, 1e-10)
    (to.pow(2).sum() + th.sum()).backward()
    ((so * so).sum() + sh.sum()).backward()
    check_grads(t, s, [(tx, sx), (th0, sh0)], 1e-9)


def test_packed_lstm_with_projection_matches_torch_per_sequence():
    # PyTorch's packed LSTM has no proj_size on cpu: each sequence alone is the oracle
    t, s = twin_of("LSTM", 5, 6, num_layers=2, bidirectional=True, proj_size=2)
    lens = [3, 6, 1]
    seqs = [rng.standard_normal((n, 5)) for n in lens]
    so, (sh, sc) = s(srnn.pack_sequence([sf.tensor(a) for a in seqs], enforce_sorted=False))
    padded, _ = srnn.pad_packed_sequence(so)
    for j, a in enumerate(seqs):
        to, (th, tc) = t(torch.tensor(a))
        close(to, padded[:lens[j], j], 1e-10)
        close(th, sh[:, j], 1e-10)
        close(tc, sc[:, j], 1e-10)


def test_pad_and_pack_sequence_utilities():
    seqs = [rng.standard_normal((n, 3)) for n in (2, 5, 3)]
    tseqs = [torch.tensor(a) for a in seqs]
    sseqs = [sf.tensor(a) for a in seqs]
    for bf, side in [(False, "right"), (True, "left")]:
        close(trnn.pad_sequence(tseqs, batch_first=bf, padding_value=-1.0, padding_side=side),
              srnn.pad_sequence(sseqs, batch_first=bf, padding_value=-1.0, padding_side=side),
              0)
    tp = trnn.pack_sequence(tseqs, enforce_sorted=False)
    sp = srnn.pack_sequence(sseqs, enforce_sorted=False)
    close(tp.data, sp.data, 0)
    assert sp.sorted_indices.tolist() == tp.sorted_indices.tolist()
    assert sp.unsorted_indices.tolist() == tp.unsorted_indices.tolist()
    for a, b in zip(trnn.unpack_sequence(tp), srnn.unpack_sequence(sp)):
        close(a, b, 0)
    with pytest.raises(ShapeError, match="decreasing"):
        srnn.pack_padded_sequence(sf.zeros(4, 3, 2), [1, 3, 2])


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch_over_steps(name):
    t, s = twin_of(name, 5, 7)
    tx, sx = leaf(rng.standard_normal((4, 3, 5)))
    th = sh = None
    tl = sl = 0
    for step in range(4):
        if name == "LSTMCell":
            th = t(tx[step], th)
            sh = s(sx[step], sh)
            tl, sl = tl + (th[0] * th[1]).sum(), sl + (sh[0] * sh[1]).sum()
        else:
            th, sh = t(tx[step], th), s(sx[step], sh)
            tl, sl = tl + th.pow(2).sum(), sl + (sh * sh).sum()
    close(tl, sl, 1e-10)
    tl.backward()
    sl.backward()
    check_grads(t, s, [(tx, sx)], 1e-9)
    one = rng.standard_normal(5)
    t_out, s_out = t(torch.tensor(one)), s(sf.tensor(one))  # unbatched
    for a, b in zip(t_out if name == "LSTMCell" else [t_out],
                    s_out if name == "LSTMCell" else [s_out]):
        close(a, b, 1e-10)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(mode):
    t, s = twin_of(mode, 3, 4, num_layers=2, bidirectional=True)
    x = rng.standard_normal((5, 3))
    to, so = t(torch.tensor(x)), s(sf.tensor(x))
    close(to[0], so[0], 1e-10)
    assert tuple(so[0].shape) == (5, 8)


def test_dropout_between_layers():
    s = sf.nn.LSTM(3, 4, num_layers=2, dropout=1.0)
    x = sf.randn(5, 2, 3)
    out = s(x)[0]
    # p = 1 zeroes the first layer's output: the second layer then sees only zeros
    w = {k: v for k, v in s.state_dict().items() if k.endswith("_l1")}
    second = sf.nn.LSTM(4, 4)
    second.load_state_dict({k.replace("_l1", "_l0"): v for k, v in w.items()})
    np.testing.assert_allclose(out.detach().numpy(), second(sf.zeros(5, 2, 4))[0].detach()
                               .numpy(), rtol=1e-6)
    s.eval()
    assert not np.allclose(s(x)[0].detach().numpy(), out.detach().numpy())


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_gradcheck_float64_packed(mode):
    from shapeflow.ops.nn.recurrent import recurrence

    gates = {"lstm": 4, "gru": 3, "rnn_tanh": 1}[mode]
    h = 3
    x = sf.tensor(rng.standard_normal((6, 2)), requires_grad=True)  # packed: sizes 3, 2, 1
    h0 = sf.tensor(rng.standard_normal((3, h)), requires_grad=True)
    c0 = sf.tensor(rng.standard_normal((3, h)), requires_grad=True)
    ws = [sf.tensor(rng.standard_normal(s) * 0.5, requires_grad=True)
          for s in [(gates * h, 2), (gates * h, h), (gates * h,), (gates * h,)]]
    for reverse in (False, True):
        def fn(x, h0, c0, *ws, reverse=reverse):
            return recurrence(mode, x, h0, c0, ws, reverse=reverse, batch_sizes=[3, 2, 1])

        assert gradcheck(fn, (x, h0, c0, *ws))


def test_two_thousand_steps_forward_and_backward():
    s = sf.nn.LSTM(4, 8)
    x = sf.randn(2000, 2, 4, requires_grad=True)
    out, (h, c) = s(x)
    (out.sum() + c.sum()).backward()
    assert x.grad.shape == (2000, 2, 4)
    assert np.isfinite(s.weight_hh_l0.grad.numpy()).all()
    cell, hx = sf.nn.GRUCell(4, 8), None  # a cell looped in Python: 2,000 chained nodes
    for _ in range(2000):
        hx = cell(x[0].detach(), hx)
    hx.sum().backward()
    assert np.isfinite(cell.weight_hh.grad.numpy()).all()


def test_meta_with_symbolic_batch():
    s = sf.nn.LSTM(8, 16, num_layers=2, bidirectional=True, proj_size=4).to("meta")
    x = sf.empty(10, "B", 8, device="meta", requires_grad=True)
    out, (h, c) = s(x)
    assert [str(d) for d in out.shape] == ["10", "B", "8"]
    assert [str(d) for d in h.shape] == ["4", "B", "4"]
    assert [str(d) for d in c.shape] == ["4", "B", "16"]
    (out.sum() + c.sum()).backward()
    assert [str(d) for d in x.grad.shape] == ["10", "B", "8"]
    assert tuple(s.weight_hr_l1_reverse.grad.shape) == (4, 16)


def test_errors_name_module_and_rule():
    lstm = sf.nn.LSTM(4, 8, num_layers=2)
    with pytest.raises(ShapeError, match=r"num_layers\*num_directions, B, H") as e:
        lstm(sf.randn(5, 3, 4), (sf.zeros(1, 3, 8), sf.zeros(2, 3, 8)))
    assert "[2, 3, 8]" in str(e.value)
    with pytest.raises(ShapeError, match="c0") as e:
        lstm(sf.randn(5, 3, 4), (sf.zeros(2, 3, 8), sf.zeros(2, 2, 8)))
    with pytest.raises(ShapeError, match="Expected 4, got 6"):
        lstm(sf.randn(5, 3, 6))
    with pytest.raises(ShapeError, match="batch_first=True"):
        sf.nn.GRU(4, 8, batch_first=True)(sf.randn(5, 4, 3))
    with pytest.raises(ShapeError, match="3-D"):
        sf.nn.RNN(4, 8)(sf.randn(4))
    with pytest.raises(ShapeError, match="hx must be"):
        sf.nn.GRUCell(4, 8)(sf.randn(3, 4), sf.zeros(2, 8))
    with pytest.raises(ValueError, match="proj_size"):
        sf.nn.LSTM(4, 8, proj_size=8)


def test_double_backward_is_a_clear_error():
    s = sf.nn.LSTM(3, 4)
    x = sf.randn(2, 1, 3, requires_grad=True)
    (g,) = sf.autograd.grad(s(x)[0].sum(), [x], create_graph=False)
    assert g.shape == (2, 1, 3)
    with pytest.raises(GraphError, match="double backward"):
        sf.autograd.grad(s(x)[0].sum(), [x], create_graph=True)


def test_inference_keeps_no_gates():
    s = sf.nn.LSTM(3, 4)
    with sf.no_grad():
        out = s(sf.randn(5, 2, 3))[0]
    assert out.grad_fn is None
    out = s(sf.randn(5, 2, 3))[0]
    kinds = [e.kind for e, _ in base.held(out.grad_fn.next[0])]
    assert "recurrent gates" in kinds
