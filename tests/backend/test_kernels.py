"""backend.kernels: the compiled kernels give what the NumPy paths give, and decline the rest."""

from importlib.util import find_spec

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.backend.cpu.ladder import table
from shapeflow.nn import functional as F
from tests.backend.kernel_paths import both_paths

pytestmark = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")


@pytest.fixture
def numpy_path():
    """Run the body with the compiled kernels off."""
    old = kernels.set_enabled(False)
    yield
    kernels.set_enabled(old)



def test_the_build_made_the_library():
    # setup.py marks the extension optional; this is where a broken build shows
    assert find_spec("shapeflow.backend.cpu._kernels") is not None


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 10.0, -10.0, 10.001, -10.001, 1e-40,
                     -1e-40, 9.9999, -9.9999, 3e38, -3e38, 1 / 1024, -1 / 1024], np.float32)


@pytest.mark.parametrize("name", ["phi", "gelu_grad"])
@pytest.mark.parametrize("times", [False, True])
@pytest.mark.parametrize("lead", [0, 5])  # specials in each lane of the 16-wide loop
def test_table_kernel_is_bit_for_bit_numpy(name, times, lead, rng):
    x = np.concatenate([np.ones(lead, np.float32), SPECIALS, SPECIALS[::-1],
                        (rng.standard_normal(70001) * 4).astype(np.float32)])
    t = rng.standard_normal(x.shape).astype(np.float32) if times else None
    fused, ref = both_paths(lambda: table.gelu_table(x, name, t))
    np.testing.assert_array_equal(fused, ref)  # NaN where NumPy has NaN, every bit elsewhere


def test_gelu_op_forward_and_backward_match(rng):
    a = (rng.standard_normal((33, 129)) * 3).astype(np.float32)

    def run():
        x = sf.tensor(a, requires_grad=True)
        y = F.gelu(x)
        y.backward(sf.tensor(np.cos(a)))
        return y.detach().numpy(), x.grad.numpy()

    (y1, g1), (y2, g2) = both_paths(run)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(g1, g2)


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("affine", ["none", "weight", "both"])
@pytest.mark.parametrize("shape", [(7, 33), (4, 5, 64), (2, 1)])
def test_layer_norm_matches_numpy_path(rms, affine, shape, rng):
    a = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    n = shape[-1]
    wa = rng.standard_normal(n).astype(np.float32)
    ba = rng.standard_normal(n).astype(np.float32)
    ga = rng.standard_normal(shape).astype(np.float32)

    def run():
        x = sf.tensor(a, requires_grad=True)
        w = sf.tensor(wa, requires_grad=True) if affine != "none" else None
        b = sf.tensor(ba, requires_grad=True) if affine == "both" else None
        y = F.rms_norm(x, (n,), w) if rms else F.layer_norm(x, (n,), w, b)
        if b is not None and rms:
            y = y + b
        y.backward(sf.tensor(ga))
        grads = [t.grad.numpy() for t in (x, w, b) if t is not None]
        return [y.detach().numpy(), *grads]

    fused, ref = both_paths(run)
    for f, r in zip(fused, ref):
        np.testing.assert_allclose(f, r, rtol=2e-5, atol=2e-5)


def test_layer_norm_only_weight_grad(rng):
    a = rng.standard_normal((6, 40)).astype(np.float32)

    def run():
        w = sf.ones(40, requires_grad=True)
        F.layer_norm(sf.tensor(a), (40,), w).sum().backward()
        return w.grad.numpy()

    fused, ref = both_paths(run)
    np.testing.assert_allclose(fused, ref, rtol=1e-5, atol=1e-5)


def test_kernels_decline_what_they_do_not_cover(rng):
    x64 = rng.standard_normal((4, 8))
    strided = rng.standard_normal((4, 16)).astype(np.float32)[:, ::2]
    assert kernels.layer_norm(x64, None, None, 1e-5, False) is None
    assert kernels.layer_norm(strided, None, None, 1e-5, False) is None
    assert kernels.layer_norm(np.ones((3, 0), np.float32), None, None, 1e-5, False) is None
    pairs = table.gelu_pairs("phi")
    assert kernels.interp_times(strided, None, pairs, 1024.0, 10241.0) is None
    assert kernels.interp_times(strided.copy(), np.ones(3, np.float32), pairs, 1024.0,
                                10241.0) is None


def test_off_means_off(numpy_path):
    assert not kernels.available()
    x = np.ones((4, 8), np.float32)
    assert kernels.layer_norm(x, None, None, 1e-5, False) is None


def test_a_library_built_for_more_than_this_cpu_is_refused(monkeypatch):
    monkeypatch.setattr(kernels, "_state", {"lib": None, "loaded": False, "enabled": True})
    monkeypatch.setattr(kernels, "_cpu_flags", lambda: {"sse2"})
    lib = kernels._load()
    # a native build on any x86-64 of the last decade assumes at least SSE4.1
    assert lib is None


def test_env_turns_the_kernels_off(monkeypatch):
    monkeypatch.setattr(kernels, "_state", {"lib": None, "loaded": False, "enabled": True})
    monkeypatch.setenv("SHAPEFLOW_KERNELS", "0")
    assert not kernels.available()


@pytest.mark.parametrize("opt", ["adam", "adamw", "amsgrad"])
def test_adam_kernel_is_bit_for_bit_numpy(opt, rng):
    """Several steps on parameters big and small, one with a NaN gradient: same bits."""
    shapes = [(300, 70), (5,), (2, 3)]
    inits = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in shapes] for _ in range(4)]
    grads[2][1][3] = np.nan

    def run():
        ps = [sf.nn.Parameter(sf.tensor(a.copy())) for a in inits]
        if opt == "adamw":
            o = sf.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)
        else:
            o = sf.optim.Adam(ps, lr=1e-2, amsgrad=opt == "amsgrad", weight_decay=0.01)
        for step in grads:
            for p, g in zip(ps, step):
                p.grad = sf.tensor(g)
            o.step()
        states = [o.state[p][k].numpy() for p in ps for k in ("exp_avg", "exp_avg_sq")]
        return [p.detach().numpy() for p in ps] + states

    fused, ref = both_paths(run)
    for f, r in zip(fused, ref):
        np.testing.assert_array_equal(f, r)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("L,S", [(7, 7), (5, 9), (9, 5), (1, 1), (64, 64)])
@pytest.mark.parametrize("spread", [1.0, 300.0])
def test_attention_softmax_matches_numpy_path(causal, L, S, spread, rng):
    """Scores small and huge (the max shift matters), causal or not, square or not."""
    qa = (rng.standard_normal((2, 3, L, 16)) * spread).astype(np.float32)
    ka = rng.standard_normal((2, 3, S, 16)).astype(np.float32)
    va = rng.standard_normal((2, 3, S, 8)).astype(np.float32)
    ga = rng.standard_normal((2, 3, L, 8)).astype(np.float32)

    def run():
        q, k, v = (sf.tensor(a, requires_grad=True) for a in (qa, ka, va))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        y.backward(sf.tensor(ga))
        return [y.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)]

    fused, ref = both_paths(run)
    for f, r in zip(fused, ref):
        np.testing.assert_allclose(f, r, rtol=1e-4, atol=1e-5 * spread)


def test_softmax_kernel_edge_rows():
    """NaN spreads over its row, so does +inf (as PyTorch); the exp stays within 2 ulp."""
    x = np.array([[0.0, -1.0, -30.0, -87.0, -88.0, -200.0],
                  [1.0, np.nan, 0.0, 0.0, 0.0, 0.0],
                  [np.inf, 1.0, 0.0, 0.0, 0.0, 0.0],
                  [3.0, 3.0, 3.0, 3.0, 3.0, 3.0]], np.float32)
    out = x.copy()
    assert kernels.softmax_rows(out, 1.0, 0, False)
    e = np.exp(x[0].astype(np.float64))
    ref0 = e / e.sum()
    np.testing.assert_allclose(out[0][:4], ref0[:4], rtol=3e-7)
    assert (out[0][4:] <= 1e-38).all()  # below float32's normal range: flushed or tiny
    assert np.isnan(out[1]).all()
    assert np.isnan(out[2]).all()
    np.testing.assert_allclose(out[3], np.full(6, 1 / 6), rtol=1e-7)


def test_causal_kernel_ignores_scores_above_the_diagonal():
    """As PyTorch's masked_fill: a NaN or inf where the mask hides it changes nothing."""
    s = np.zeros((1, 4, 4), np.float32)
    s[0, 0, 1:] = [np.nan, np.inf, 5.0]
    out = s.copy().reshape(4, 4)
    assert kernels.softmax_rows(out, 1.0, 4, True)
    np.testing.assert_allclose(out, np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None],
                               rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore", [False, True])
@pytest.mark.parametrize("spread", [1.0, 50.0])
def test_cross_entropy_matches_numpy_path(reduction, ignore, spread, rng):
    xa = (rng.standard_normal((37, 11)) * spread).astype(np.float32)
    ta = rng.integers(0, 11, 37)
    if ignore:
        ta[::3] = -100

    def run():
        x = sf.tensor(xa, requires_grad=True)
        loss = F.cross_entropy(x, sf.tensor(ta), reduction=reduction)
        (loss * 3.0).backward()
        return [loss.detach().numpy(), x.grad.numpy()]

    fused, ref = both_paths(run)
    for f, r in zip(fused, ref):
        np.testing.assert_allclose(f, r, rtol=2e-5, atol=2e-6)


def test_cross_entropy_kernel_leaves_errors_and_inf_to_numpy(rng):
    xa = rng.standard_normal((4, 3)).astype(np.float32)
    assert kernels.cross_entropy(xa, np.array([0, 1, 3, 2]), -100) is None  # out of range
    with pytest.raises(sf.ShapeError, match="out of range"):
        F.cross_entropy(sf.tensor(xa), sf.tensor(np.array([0, 1, 3, 2])))
    xa[1, 2] = np.inf
    assert kernels.cross_entropy(xa, np.array([0, 1, 2, 2]), -100) is None
    fused, ref = both_paths(
        lambda: F.cross_entropy(sf.tensor(xa), sf.tensor(np.array([0, 1, 2, 2]))).numpy())
    np.testing.assert_array_equal(fused, ref)

    def grad():  # backward after a NumPy forward: the NaN row stays NaN
        x = sf.tensor(xa, requires_grad=True)
        with np.errstate(invalid="ignore"):
            F.cross_entropy(x, sf.tensor(np.array([0, 1, 2, 2]))).backward()
        return x.grad.numpy()

    fused, ref = both_paths(grad)
    np.testing.assert_array_equal(fused, ref)
    assert np.isnan(fused[1, 2])


def test_cross_entropy_all_ignored_is_nan_as_torch(rng):
    xa = rng.standard_normal((3, 4)).astype(np.float32)
    t = sf.tensor(np.full(3, -100))
    fused, ref = both_paths(lambda: F.cross_entropy(sf.tensor(xa), t).numpy())
    assert np.isnan(fused) and np.isnan(ref)


def test_address_is_the_first_element_for_every_layout():
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    ro = base.copy()
    ro.flags.writeable = False
    for a in (base, base.T, base[1:, 2:], base[::2], ro, ro.T, np.empty(0, np.float32),
              base[2:4]):
        assert kernels.address(a) == a.ctypes.data


def test_a_library_missing_a_kernel_is_refused(monkeypatch):
    """A stale build (an older kernels.c) falls back to NumPy instead of failing later."""
    monkeypatch.setattr(kernels, "_state", {"lib": None, "loaded": False, "enabled": True})
    monkeypatch.setitem(kernels._SIGNATURES, "no_such_kernel_f32", [])
    assert kernels._load() is None
