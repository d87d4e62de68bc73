"""nn.LSTMCell's fused step (ops/nn/lstm_cell.py) against PyTorch's LSTMCell: values and every
gradient over a few chained steps, float32 and float64, on its three paths (one compiled call
with MKL's products, the compiled pointwise part with NumPy's products, NumPy alone); hx=None,
batch 1, unbatched input, no bias, strided input columns; finite differences in float64; the
saved set and meta shapes; errors."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.autograd import gradcheck
from shapeflow.backend.cpu import gemm
from shapeflow.backend.cpu import rnn_cell_kernels as rk
from shapeflow.errors import DTypeError, GraphError, ShapeError
from shapeflow.ops.base import held
from shapeflow.ops.nn.lstm_cell import LSTMCellStep, lstm_cell
from tests.ops.harness import assert_saved_matches_declared

needs_kernels = pytest.mark.skipif(not rk.available(), reason="LSTM cell kernels not built")


def _paths():
    out = [pytest.param("numpy", id="numpy")]
    out.append(pytest.param("pointwise", id="pointwise", marks=needs_kernels))
    mkl = pytest.mark.skipif(gemm.backend() != "mkl", reason="MKL not loaded")
    out.append(pytest.param("fused", id="fused", marks=[needs_kernels, mkl]))
    return out


@pytest.fixture(params=_paths())
def path(request):
    """Run the test on one path of the op, then restore the default."""
    kind = request.param
    old = rk.set_enabled(kind != "numpy", use_gemm=kind == "fused")
    yield kind
    rk.set_enabled(old)


def twins(inp, hid, dtype, bias=True, seed=0):
    torch.manual_seed(seed)
    t = torch.nn.LSTMCell(inp, hid, bias=bias).to(dtype)
    s = sf.nn.LSTMCell(inp, hid, bias=bias)
    s = s.double() if dtype is torch.float64 else s
    s.load_state_dict({k: sf.tensor(v.detach().numpy().copy()) for k, v in
                       t.state_dict().items()})
    return t, s


def as_np(t):
    return t.detach().numpy()


TOL = {torch.float64: 1e-12, torch.float32: 2e-5}


def run_steps(t, s, xs, hx, dtype):
    """A few steps from hx (None or a pair of arrays) on both; loss sums h * c and h^2."""
    th = None if hx is None else tuple(torch.tensor(a, requires_grad=True) for a in hx)
    sh = None if hx is None else tuple(sf.tensor(a, requires_grad=True) for a in hx)
    tx = [torch.tensor(a, requires_grad=True) for a in xs]
    sx = [sf.tensor(a, requires_grad=True) for a in xs]
    t_state, s_state = th, sh
    tl = sl = 0
    for a, b in zip(tx, sx):
        t_state, s_state = t(a, t_state), s(b, s_state)
        tl = tl + (t_state[0] * t_state[1]).sum() + (t_state[0] ** 2).sum()
        sl = sl + (s_state[0] * s_state[1]).sum() + (s_state[0] * s_state[0]).sum()
    tl.backward()
    sl.backward()
    tol = TOL[dtype]
    for a, b in zip(t_state, s_state):
        np.testing.assert_allclose(as_np(b), as_np(a), rtol=tol, atol=tol)
    pairs = list(zip(tx, sx)) + (list(zip(th, sh)) if hx is not None else [])
    for a, b in pairs:
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=tol, atol=tol)
    for n, p in t.named_parameters():
        np.testing.assert_allclose(getattr(s, n).grad.numpy(), p.grad.numpy(), rtol=tol,
                                   atol=tol * 10)
    return s_state


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("batch,inp,hid,bias,given", [
    (5, 3, 7, True, True), (1, 4, 2, True, False), (6, 1, 9, False, True),
    (3, 11, 17, True, False)])
def test_steps_match_torch(path, dtype, batch, inp, hid, bias, given, rng):
    t, s = twins(inp, hid, dtype, bias)
    npdt = np.float64 if dtype is torch.float64 else np.float32
    xs = [rng.standard_normal((batch, inp)).astype(npdt) for _ in range(3)]
    hx = tuple(rng.standard_normal((batch, hid)).astype(npdt) for _ in range(2)) \
        if given else None
    h, c = run_steps(t, s, xs, hx, dtype)
    assert h.shape == (batch, hid) and c.shape == (batch, hid)
    assert h.dtype == c.dtype == (sf.float64 if dtype is torch.float64 else sf.float32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_unbatched_input(path, dtype, rng):
    t, s = twins(4, 6, dtype)
    npdt = np.float64 if dtype is torch.float64 else np.float32
    xs = [rng.standard_normal(4).astype(npdt) for _ in range(2)]
    hx = tuple(rng.standard_normal(6).astype(npdt) for _ in range(2))
    h, c = run_steps(t, s, xs, hx, dtype)
    assert h.shape == (6,) and c.shape == (6,)
    assert tuple(s(sf.tensor(xs[0]))[1].shape) == (6,)  # hx=None, unbatched


def test_strided_and_transposed_inputs(path, rng):
    """A column of a [B, T] sequence split by time (rows 8*T bytes apart) and a transposed
    [B, F] input give PyTorch's values and gradients."""
    t, s = twins(1, 5, torch.float64)
    seq = rng.standard_normal((4, 6))
    ts, ss = torch.tensor(seq, requires_grad=True), sf.tensor(seq, requires_grad=True)
    th = sh = None
    for a, b in zip(ts.split(1, dim=1), ss.split(1, dim=1)):
        th, sh = t(a, th), s(b, sh)
    (th[0].sum() + th[1].sum()).backward()
    (sh[0].sum() + sh[1].sum()).backward()
    np.testing.assert_allclose(as_np(sh[0]), as_np(th[0]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ss.grad.numpy(), ts.grad.numpy(), rtol=1e-12, atol=1e-12)
    t2, s2 = twins(3, 4, torch.float64)
    xt = rng.standard_normal((3, 5))
    out_t, out_s = t2(torch.tensor(xt).T), s2(sf.tensor(xt).T)
    np.testing.assert_allclose(as_np(out_s[1]), as_np(out_t[1]), rtol=1e-12, atol=1e-12)


def test_outputs_are_contiguous_views_of_one_step(rng):
    s = sf.nn.LSTMCell(3, 4).double()
    h, c = s(sf.tensor(rng.standard_normal((2, 3))))
    assert h.is_contiguous() and c.is_contiguous()
    assert h.grad_fn.next[0] is c.grad_fn.next[0]  # one node for both
    assert isinstance(h.grad_fn.next[0], LSTMCellStep)
    assert tuple(h.view(-1).shape) == (8,)


@pytest.mark.parametrize("dtype", [sf.float64, sf.float32])
def test_saved_set_is_what_backward_keeps(path, dtype, rng):
    npdt = dtype.np
    x = sf.tensor(rng.standard_normal((3, 2)).astype(npdt))  # data: needs no gradient
    cell = sf.nn.LSTMCell(2, 5).to(dtype)
    h, c = cell(x)
    assert_saved_matches_declared(h)
    node = h.grad_fn.next[0]
    # c and c' (the output), x and h for the weights' gradients, the activated gates; no
    # weight: neither x (data) nor h (zeros) needs a gradient
    what = [(e.source, e.index, e.name) for e, _ in held(node)]
    assert what == [(0, 2, None), (1, None, None), (0, 0, None), (0, 1, None),
                    (2, None, "gates")]
    h2, c2 = cell(x, (h, c))
    assert_saved_matches_declared(h2)
    assert (0, 4, None) in [(e.source, e.index, e.name) for e, _ in held(h2.grad_fn.next[0])]
    (h2.sum() + c2.sum()).backward()
    assert cell.weight_ih.grad is not None and cell.weight_hh.grad is not None


def test_gradcheck_float64(path, rng):
    """Finite differences through two chained steps, every input requiring grad."""
    def leaf(*shape):
        return sf.tensor(rng.standard_normal(shape) * 0.7, requires_grad=True)

    x1, x2, h0, c0 = leaf(3, 2), leaf(3, 2), leaf(3, 4), leaf(3, 4)
    ws = [leaf(16, 2), leaf(16, 4), leaf(16), leaf(16)]

    def fn(x1, x2, h0, c0, w_ih, w_hh, b_ih, b_hh):
        out = lstm_cell(x1, h0, c0, w_ih, w_hh, b_ih, b_hh)
        out = lstm_cell(x2, out[0], out[1], w_ih, w_hh, b_ih, b_hh)
        return out * out

    assert gradcheck(fn, (x1, x2, h0, c0, *ws))
    xu, hu, cu = leaf(2), leaf(4), leaf(4)
    assert gradcheck(lambda x, h, c, a, b: lstm_cell(x, h, c, a, b).sin(),
                     (xu, hu, cu, ws[0], ws[1]))


def test_meta_shapes_with_a_symbolic_batch():
    cell = sf.nn.LSTMCell(8, 16).to("meta")
    x = sf.empty("B", 8, device="meta", requires_grad=True)
    h, c = cell(x)
    assert [str(d) for d in h.shape] == ["B", "16"]
    h, c = cell(x, (h, c))
    (h.sum() + c.sum()).backward()
    assert [str(d) for d in x.grad.shape] == ["B", "8"]
    assert tuple(cell.weight_hh.grad.shape) == (64, 16)
    one = sf.nn.LSTMCell(8, 16).to("meta")(sf.empty(8, device="meta"))
    assert tuple(one[0].shape) == (16,)


def test_errors_name_the_rule():
    cell = sf.nn.LSTMCell(4, 8)
    with pytest.raises(ShapeError, match="inconsistent input_size: got 5 expected 4"):
        cell(sf.randn(3, 5))
    with pytest.raises(ShapeError, match="1D or 2D"):
        cell(sf.randn(2, 3, 4))
    with pytest.raises(ShapeError, match=r"c0 must be \[3, 8\]"):
        cell(sf.randn(3, 4), (sf.zeros(3, 8), sf.zeros(2, 8)))
    with pytest.raises(ShapeError, match=r"h0 must be \[8\]"):
        cell(sf.randn(4), (sf.zeros(1, 8), sf.zeros(8)))
    with pytest.raises(DTypeError, match="float32 or float64"):
        cell(sf.randn(3, 4, dtype=sf.float64))
    with pytest.raises(ShapeError, match=r"w_ih must be \[32, 4\]"):
        lstm_cell(sf.randn(3, 4), sf.zeros(3, 8), sf.zeros(3, 8), sf.randn(32, 5),
                  sf.randn(32, 8))
    x = sf.randn(3, 4, requires_grad=True)
    with pytest.raises(GraphError, match="double backward"):
        sf.autograd.grad(cell(x)[0].sum(), [x], create_graph=True)


def test_an_empty_batch_gives_zero_weight_gradients(path):
    t, s = twins(3, 4, torch.float64)
    th = t(torch.zeros(0, 3, dtype=torch.float64, requires_grad=True))
    sh = s(sf.zeros(0, 3, dtype=sf.float64, requires_grad=True))
    assert tuple(sh[0].shape) == (0, 4)
    (th[0].sum() + th[1].sum()).backward()
    (sh[0].sum() + sh[1].sum()).backward()
    for n, p in t.named_parameters():
        np.testing.assert_array_equal(getattr(s, n).grad.numpy(), p.grad.numpy())
