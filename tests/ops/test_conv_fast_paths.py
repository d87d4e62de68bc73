"""conv2d's block and Winograd paths, the fused instance_norm, reflection padding and integer
nearest upsampling against PyTorch: values, gradients, float64 gradcheck, the saved set, meta
shapes, and each compiled path against NumPy's."""

import importlib

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.backend.cpu import conv_kernels as ck
from shapeflow.nn import functional as F
from shapeflow.ops.conv import conv2d_blocked, conv2d_winograd
from tests.ops.harness import check_op

TF = torch.nn.functional
conv2d_module = importlib.import_module("shapeflow.ops.conv.conv2d")


@pytest.fixture(autouse=True)
def small_convs_take_the_new_paths(monkeypatch):
    """These shapes are below conv2d.SMALL_MACS: lower it so they exercise the block and
    Winograd paths."""
    monkeypatch.setattr(conv2d_module, "SMALL_MACS", 0)


def both(fn):
    """fn() with backend/cpu/conv_kernels.c, then with NumPy alone (im2col, no Winograd)."""
    fused = fn()
    old = ck.set_enabled(False)
    try:
        return fused, fn()
    finally:
        ck.set_enabled(old)


def grads(x, w, b, g, lib, **kw):
    """(y, dx, dw, db) of conv2d in shapeflow (lib=sf) or PyTorch."""
    if lib is torch:
        xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        y = TF.conv2d(xt, wt, bt, **kw)
        (y * torch.tensor(g)).sum().backward()
        return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()
    xs, ws, bs = (sf.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.conv2d(xs, ws, bs, **kw)
    (y * sf.tensor(g)).sum().backward()
    return y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy(), bs.grad.numpy()


CASES = [  # x shape, out channels, kernel, conv2d keywords
    ((2, 5, 7, 9), 4, 3, dict(padding=1)),          # odd sizes: a cropped last tile
    ((3, 6, 8, 8), 7, 3, dict(padding=(2, 0))),
    ((1, 3, 2, 2), 5, 3, dict(padding=1)),          # taps cropped to 2x2: im2col
    ((2, 4, 10, 6), 3, 3, dict()),
    ((2, 3, 9, 9), 4, 3, dict(stride=2, padding=1)),
    ((2, 3, 12, 11), 2, 9, dict(padding=4)),
    ((3, 4, 6, 7), 5, 3, dict(stride=(2, 1), dilation=(1, 2), padding=2)),
]


@pytest.fixture(params=["default", "tiny blocks"])
def blocks(request, monkeypatch):
    """The default block sizes, or blocks of one output row (bands of each image)."""
    if request.param == "tiny blocks":
        monkeypatch.setattr(conv2d_blocked, "BLOCK_BYTES", 1)
        monkeypatch.setattr(conv2d_winograd, "BLOCK_BYTES", 1)
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,O,k,kw", CASES)
def test_conv2d_paths_match_torch(xs, O, k, kw, dtype, blocks, rng):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((O, xs[1], k, k)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    y = TF.conv2d(torch.tensor(x), torch.tensor(w), **kw)
    g = rng.standard_normal(tuple(y.shape)).astype(dtype)
    ref = grads(x, w, b, g, torch, **kw)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for got in both(lambda: grads(x, w, b, g, sf, **kw)):
        for a, r in zip(got, ref):
            assert a.dtype == dtype and a.shape == r.shape
            np.testing.assert_allclose(a, r, **tol)


def test_winograd_takes_3x3_stride1_float32_only(monkeypatch, rng):
    calls = []
    real = conv2d_winograd.forward
    monkeypatch.setattr(conv2d_winograd, "forward", lambda *a: calls.append(1) or real(*a))
    x = sf.tensor(rng.standard_normal((1, 2, 6, 6)).astype(np.float32))
    w = sf.tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    F.conv2d(x, w, padding=1)
    assert calls == ([1] if ck.winograd_available() else [])
    F.conv2d(x.double(), w.double(), padding=1)
    F.conv2d(x, w, stride=2)
    assert len(calls) == (1 if ck.winograd_available() else 0)
    monkeypatch.setattr(conv2d_module, "SMALL_MACS", 1 << 24)  # small convs keep im2col
    F.conv2d(x, w, padding=1)
    assert len(calls) == (1 if ck.winograd_available() else 0)


@pytest.mark.parametrize("kw", [dict(padding=1), dict(stride=2, padding=1)])
def test_conv2d_op_contract(kw, rng):
    """gradcheck in float64, saved bytes as declared, meta shapes (harness)."""
    check_op(lambda x, w, b: F.conv2d(x, w, b, **kw), lambda x, w, b: TF.conv2d(x, w, b, **kw),
             rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((4, 3, 3, 3)),
             rng.standard_normal(4), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (3, 2, 7), (1, 2, 3, 2, 2)])
def test_instance_norm_matches_torch(shape, affine, rng):
    x = rng.standard_normal(shape) * 2 + 1
    if affine:
        check_op(lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                 lambda x, w, b: TF.instance_norm(x, weight=w, bias=b), x,
                 rng.standard_normal(shape[1]), rng.standard_normal(shape[1]), rtol=1e-4,
                 atol=1e-5)
    else:
        check_op(F.instance_norm, TF.instance_norm, x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_instance_norm_both_paths_and_the_module(dtype, rng):
    x = (rng.standard_normal((2, 4, 6, 5)) * 3 - 1).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    mod, tmod = sf.nn.InstanceNorm2d(4, affine=True), torch.nn.InstanceNorm2d(4, affine=True)
    wb = rng.standard_normal((2, 4)).astype(dtype)
    tmod = tmod.to(torch.float64 if dtype == np.float64 else torch.float32)
    with torch.no_grad():
        tmod.weight.copy_(torch.tensor(wb[0])), tmod.bias.copy_(torch.tensor(wb[1]))
    mod = mod.to(sf.float64 if dtype == np.float64 else sf.float32)
    mod.weight.data = sf.tensor(wb[0])
    mod.bias.data = sf.tensor(wb[1])
    tx = torch.tensor(x, requires_grad=True)
    (tmod(tx) * torch.tensor(g)).sum().backward()
    ref = (tx.grad.numpy(), tmod.weight.grad.numpy(), tmod.bias.grad.numpy())

    def run():
        xs = sf.tensor(x, requires_grad=True)
        mod.zero_grad()
        y = mod(xs)
        (y * sf.tensor(g)).sum().backward()
        return y.detach().numpy(), xs.grad.numpy(), mod.weight.grad.numpy(), \
            mod.bias.grad.numpy()

    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    for got in both(run):
        np.testing.assert_allclose(got[0], tmod(tx).detach().numpy(), **tol)
        for a, r in zip(got[1:], ref):
            assert a.dtype == dtype
            np.testing.assert_allclose(a, r, **tol)


def test_instance_norm_double_backward_matches_torch(rng):
    x, w = rng.standard_normal((2, 3, 4, 4)), rng.standard_normal(3)
    outs = []
    for lib, fn in ((sf, F.instance_norm), (torch, TF.instance_norm)):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = fn(xt, weight=wt)
        (gx,) = lib.autograd.grad((y * y * y).sum(), xt, create_graph=True)
        (gx * gx).sum().backward()
        outs.append((xt.grad.detach().numpy(), wt.grad.detach().numpy()))
    for a, r in zip(*outs):
        np.testing.assert_allclose(a, r, rtol=1e-8, atol=1e-10)


def test_instance_norm_keeps_its_running_stats_path():
    x = np.random.default_rng(0).standard_normal((3, 2, 4, 4))
    mod = sf.nn.InstanceNorm2d(2, track_running_stats=True).double()
    tmod = torch.nn.InstanceNorm2d(2, track_running_stats=True).double()
    mod(sf.tensor(x)), tmod(torch.tensor(x))
    np.testing.assert_allclose(mod.running_var.numpy(), tmod.running_var.numpy(), rtol=1e-10)


@pytest.mark.parametrize("shape,pad", [((2, 3, 5, 6), (2, 3, 1, 4)), ((2, 4, 7), (3, 0)),
                                       ((1, 2, 4, 4), (3, 3, 3, 3)),
                                       ((2, 2, 3, 4, 5), (1, 2, 0, 3, 2, 1))])
def test_reflection_pad_matches_torch(shape, pad, rng):
    check_op(lambda x: F.pad(x, pad, mode="reflect"), lambda x: TF.pad(x, pad, mode="reflect"),
             rng.standard_normal(shape))


def test_reflection_pad_double_backward_and_module(rng):
    x = rng.standard_normal((2, 3, 5, 5))
    outs = []
    for lib in (sf, torch):
        xt = lib.tensor(x, requires_grad=True)
        y = lib.nn.ReflectionPad2d((2, 1, 3, 0))(xt)
        (gx,) = lib.autograd.grad((y ** 3).sum(), xt, create_graph=True)
        gx.sum().backward()
        outs.append((y.detach().numpy(), xt.grad.numpy()))
    for a, r in zip(*outs):
        np.testing.assert_allclose(a, r, rtol=1e-10)


@pytest.mark.parametrize("shape,kw", [((2, 3, 4, 5), dict(scale_factor=2)),
                                      ((1, 2, 3, 3), dict(size=(6, 9))),
                                      ((2, 2, 5), dict(scale_factor=3)),
                                      ((1, 2, 4, 4), dict(size=(6, 6)))])  # not integer
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_upsampling_matches_torch(shape, kw, mode, rng):
    check_op(lambda x: F.interpolate(x, mode=mode, **kw),
             lambda x: TF.interpolate(x, mode=mode, **kw), rng.standard_normal(shape))
