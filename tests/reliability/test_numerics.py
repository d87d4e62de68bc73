"""Numerics against PyTorch: losses at large logits, masked rows, sigmoid tails, BCE edges."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def compiled(request):
    """Runs a test with the compiled kernels on, then off (the NumPy paths)."""
    old = kernels.set_enabled(request.param)
    yield request.param
    kernels.set_enabled(old)


def _ce_both(x: np.ndarray, t: np.ndarray, weight=None, **kw):
    """(loss, grad) of cross_entropy from shapeflow and from PyTorch, as float64 arrays."""
    xs = sf.tensor(x, requires_grad=True)
    ws = None if weight is None else sf.tensor(weight)
    ls = F.cross_entropy(xs, sf.tensor(t), ws, **kw)
    ls.sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    wt = None if weight is None else torch.tensor(weight)
    lt = TF.cross_entropy(xt, torch.tensor(t), wt, **kw)
    lt.sum().backward()
    return ((ls.detach().numpy().astype(np.float64), xs.grad.numpy().astype(np.float64)),
            (lt.detach().numpy().astype(np.float64), xt.grad.numpy().astype(np.float64)))


# ---- cross_entropy at large logits: no cancellation between logsumexp and the logit ----

def test_cross_entropy_issue_example(compiled):
    (loss, _), (want, _) = _ce_both(np.array([[1e5, 1e5 - 1, 1e5 - 2]], np.float32),
                                    np.array([0]))
    np.testing.assert_allclose(loss, want, rtol=1e-6)  # was 0.40625 against 0.4076


@pytest.mark.parametrize("base", [1e4, 1e5, 1e6])
@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                {"label_smoothing": 0.1}, {"weight": True}],
                         ids=["mean", "sum", "none", "smoothing", "weight"])
def test_cross_entropy_large_logits(compiled, base, kw):
    rng = np.random.default_rng(0)
    x = (base + rng.normal(0, 3, (16, 40))).astype(np.float32)
    t = rng.integers(0, 40, 16)
    kw = dict(kw)
    weight = rng.uniform(0.5, 2, 40).astype(np.float32) if kw.pop("weight", False) else None
    (loss, grad), (want, want_grad) = _ce_both(x, t, weight, **kw)
    np.testing.assert_allclose(loss, want, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("base", [1e4, 1e6])
def test_cross_entropy_probability_targets_large_logits(compiled, base):
    rng = np.random.default_rng(1)
    x = (base + rng.normal(0, 3, (8, 12))).astype(np.float32)
    p = rng.uniform(0, 1, (8, 12)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    (loss, grad), (want, want_grad) = _ce_both(x, p)
    np.testing.assert_allclose(loss, want, rtol=2e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-7)


# ---- cross_entropy: rows at ignore_index are left out, whatever they hold ---------------

@pytest.mark.parametrize("bad", ["nan", "+inf", "all -inf"])
@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                {"label_smoothing": 0.2}, {"weight": True}],
                         ids=["mean", "sum", "none", "smoothing", "weight"])
def test_cross_entropy_ignored_bad_rows(compiled, bad, kw):
    rng = np.random.default_rng(2)
    x = rng.normal(0, 2, (6, 5)).astype(np.float32)
    t = rng.integers(0, 5, 6)
    ignored = [1, 4]
    for r in ignored:
        x[r] = {"nan": [np.nan, 0, 1, 2, 3], "+inf": [np.inf, 0, 1, 2, 3],
                "all -inf": [-np.inf] * 5}[bad]
        t[r] = -100
    kw = dict(kw)
    weight = rng.uniform(0.5, 2, 5).astype(np.float32) if kw.pop("weight", False) else None
    (loss, grad), (want, want_grad) = _ce_both(x, t, weight, **kw)
    assert np.isfinite(loss).all()
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-7)
    # PyTorch's log_softmax backward gives NaN in an ignored row; shapeflow gives it zeros
    kept = [r for r in range(6) if r not in ignored]
    np.testing.assert_allclose(grad[kept], want_grad[kept], rtol=1e-5, atol=1e-7)
    assert (grad[ignored] == 0).all()


# ---- sigmoid: exp(-|x|) on each side, no cancellation in the negative tail --------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
def test_sigmoid_tails(compiled, dtype):
    x = np.linspace(-80, 80, 641)
    if dtype == "float16":
        x = np.linspace(-16, 16, 321)  # float16 keeps sigmoid down to ~1e-7
    xt = torch.tensor(x).to(getattr(torch, dtype))
    xs = sf.tensor(xt.float().numpy()).to(getattr(sf, dtype))
    got = sf.sigmoid(xs).float().numpy()
    want = torch.sigmoid(xt).float().numpy()
    rtol = {"float32": 1e-6, "float64": 1e-6, "bfloat16": 8e-3, "float16": 1e-3}[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


def test_sigmoid_grad_and_bce_at_minus_25(compiled):
    xs = sf.tensor([-25.0], requires_grad=True)
    xt = torch.tensor([-25.0], requires_grad=True)
    s, st = sf.sigmoid(xs), torch.sigmoid(xt)
    ls = F.binary_cross_entropy(s, sf.tensor([1.0]))
    lt = TF.binary_cross_entropy(st, torch.tensor([1.0]))
    np.testing.assert_allclose(s.detach().numpy(), st.detach().numpy(), rtol=1e-6)
    # the loss was 100, not 25
    np.testing.assert_allclose(ls.detach().numpy(), lt.detach().numpy(), rtol=1e-6)
    ls.backward()
    lt.backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-5)


# ---- binary_cross_entropy at p = 0 and 1: PyTorch's clamped log and denominator ----------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_grad_at_zero_and_one(compiled, reduction, weighted):
    p = np.array([0, 1, 0.5, 0, 1, 1e-30, 0.25], np.float32)
    y = np.array([0, 1, 0.3, 1, 0, 1, 0.5], np.float32)
    w = np.linspace(0.5, 2, 7).astype(np.float32) if weighted else None
    ps, pt = sf.tensor(p, requires_grad=True), torch.tensor(p, requires_grad=True)
    ys, yt = sf.tensor(y, requires_grad=True), torch.tensor(y, requires_grad=True)
    ls = F.binary_cross_entropy(ps, ys, None if w is None else sf.tensor(w),
                                reduction=reduction)
    lt = TF.binary_cross_entropy(pt, yt, None if w is None else torch.tensor(w),
                                 reduction=reduction)
    np.testing.assert_allclose(ls.detach().numpy(), lt.detach().numpy(), rtol=1e-6)
    ls.sum().backward()
    lt.sum().backward()
    assert np.isfinite(ps.grad.numpy()).all()  # was NaN at p = 0 and 1
    np.testing.assert_allclose(ps.grad.numpy(), pt.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ys.grad.numpy(), yt.grad.numpy(), rtol=1e-6)  # -logit(p)


# ---- group_norm: one value per group is an error, as in PyTorch -------------------------

@pytest.mark.parametrize("shape,groups", [((1, 4), 4), ((1, 4, 1), 4), ((1, 6, 1, 1), 6),
                                          ((2, 4), 4), ((1, 4, 1), 2), ((1, 4, 2), 4)])
def test_group_norm_single_value_per_group(shape, groups):
    x = np.random.default_rng(3).normal(size=shape).astype(np.float32)
    try:
        want = TF.group_norm(torch.tensor(x), groups)
    except ValueError:
        with pytest.raises(sf.ShapeError, match="group_norm"):
            F.group_norm(sf.tensor(x), groups)
        return
    np.testing.assert_allclose(F.group_norm(sf.tensor(x), groups).numpy(), want.numpy(),
                               rtol=1e-5, atol=1e-6)


# ---- GradScaler.scale keeps the output's dtype and shape, as torch.amp.GradScaler -------

@pytest.mark.parametrize("dtype,shape", [("float16", ()), ("float16", (3,)),
                                         ("bfloat16", (3,)), ("float32", ()),
                                         ("float64", ()), ("float64", (2,))])
def test_grad_scaler_scale_dtype(dtype, shape):
    v = np.full(shape, 0.5, np.float32)
    out = sf.amp.GradScaler("cpu").scale(sf.tensor(v).to(getattr(sf, dtype)))
    want = torch.amp.GradScaler("cpu").scale(torch.tensor(v).to(getattr(torch, dtype)))
    assert str(out.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    assert tuple(out.shape) == tuple(want.shape)
    np.testing.assert_array_equal(out.float().numpy(), want.float().numpy())  # 32768 in fp16


# ---- a 16-bit tensor times a 0-d float32 one: the scalar stays float32 ----------------------

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("c", [65536.0, 1e-5, 3.3, 7])
@pytest.mark.parametrize("scalar_dtype", [None, "float64", "int64"])
@pytest.mark.parametrize("op", ["x * c", "x / c", "c * x", "c / x"])
def test_half_tensor_with_a_0d_tensor_as_pytorch(dtype, c, scalar_dtype, op):
    # PyTorch keeps a 0-d second operand of mul/div in float32 (65536 would be fp16's inf);
    # a 0-d first operand is rounded to the 16-bit dtype first
    values = [0.5, 1e-3, 3.0]
    got, want = [], []
    for m, out in ((sf, got), (torch, want)):
        x = m.tensor(values, dtype=getattr(m, dtype))
        c_ = m.tensor(c, dtype=getattr(m, scalar_dtype) if scalar_dtype else None)
        with np.errstate(all="ignore"):
            r = eval(op, {"x": x, "c": c_})
        out += [str(r.dtype).split(".")[-1], r.float().tolist()]
    assert got == want
