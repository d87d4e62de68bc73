"""The compiled CNN paths (batch norm, col2im for strided input gradients) and the cropping of
kernel taps that read only padding: both paths against PyTorch in float64."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.nn import functional as F
from tests.backend.kernel_paths import both_paths

needs_kernels = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")



def conv_grads(x, w, g, **kw):
    """(y, dx, dw) of conv2d in shapeflow, float32."""
    xs, ws = sf.tensor(x, requires_grad=True), sf.tensor(w, requires_grad=True)
    y = F.conv2d(xs, ws, **kw)
    (y * sf.tensor(g)).sum().backward()
    return y.detach().numpy(), xs.grad.numpy(), ws.grad.numpy()


def torch_conv_grads(x, w, g, **kw):
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    wt = torch.tensor(w.astype(np.float64), requires_grad=True)
    y = torch.nn.functional.conv2d(xt, wt, **kw)
    (y * torch.tensor(g.astype(np.float64))).sum().backward()
    return y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()


CONVS = [  # x shape, w shape, conv2d keywords
    ((3, 5, 8, 8), (7, 5, 3, 3), dict(stride=2, padding=1)),
    ((2, 4, 7, 9), (6, 4, 3, 2), dict(stride=(2, 3), padding=(1, 0))),
    ((2, 3, 9, 9), (4, 3, 3, 3), dict(stride=2, padding=2, dilation=2)),
    ((1, 6, 5, 5), (5, 6, 1, 1), dict(stride=2)),
    ((4, 8, 1, 1), (9, 8, 3, 3), dict(padding=1)),            # one tap of nine reads data
    ((4, 8, 2, 2), (9, 8, 3, 3), dict(stride=2, padding=1)),  # four taps
    ((2, 3, 2, 3), (4, 3, 3, 3), dict(padding=1)),  # every tap counts
    ((2, 3, 1, 4), (4, 3, 5, 3), dict(padding=(2, 1), dilation=(1, 2))),
    ((2, 3, 3, 3), (4, 3, 3, 3), dict(padding=3, dilation=3)),  # the centre tap alone
    ((2, 4, 6, 6), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
]


@needs_kernels
@pytest.mark.parametrize("xs,ws,kw", CONVS)
def test_conv2d_both_paths_match_torch(xs, ws, kw, rng):
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    ref = torch_conv_grads(x, w, np.ones(1, np.float32), **kw)
    g = rng.standard_normal(ref[0].shape).astype(np.float32)
    ref = torch_conv_grads(x, w, g, **kw)
    for got in both_paths(lambda: conv_grads(x, w, g, **kw)):
        for a, r in zip(got, ref):
            assert a.dtype == np.float32
            np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("xs,ws,kw", CONVS)
def test_conv2d_float64_matches_torch_with_cropped_taps(xs, ws, kw, rng):
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, wt, **kw)
    g = rng.standard_normal(yt.shape)
    (yt * torch.tensor(g)).sum().backward()
    xs_, ws_ = sf.tensor(x, requires_grad=True), sf.tensor(w, requires_grad=True)
    y = F.conv2d(xs_, ws_, **kw)
    (y * sf.tensor(g)).sum().backward()
    for a, r in ((y, yt), (xs_.grad, xt.grad), (ws_.grad, wt.grad)):
        np.testing.assert_allclose(a.detach().numpy(), r.detach().numpy(), rtol=1e-10,
                                   atol=1e-10)


@pytest.mark.parametrize("shape,kw", [((2, 4, 1, 1), dict(stride=2, padding=1,
                                                          output_padding=1)),
                                      ((2, 4, 2, 3), dict(stride=3, padding=1)),
                                      ((1, 4, 3, 3), dict(stride=2, padding=2, dilation=2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_transpose2d_matches_torch(shape, kw, dtype, rng):
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    yt = torch.nn.functional.conv_transpose2d(xt, wt, **kw)
    yt.pow(2).sum().backward()
    xs, ws = sf.tensor(x, requires_grad=True), sf.tensor(w, requires_grad=True)
    y = F.conv_transpose2d(xs, ws, **kw)
    (y * y).sum().backward()
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for a, r in ((y, yt), (xs.grad, xt.grad), (ws.grad, wt.grad)):
        np.testing.assert_allclose(a.detach().numpy(), r.detach().numpy(), rtol=tol, atol=tol)


@needs_kernels
@pytest.mark.parametrize("shape", [(32, 16, 8, 8), (5, 3), (7, 4, 1), (2, 5, 3, 2, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_both_paths_match_torch(shape, affine, rng):
    x = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    C = shape[1]
    w = (rng.standard_normal(C) + 1).astype(np.float32) if affine else None
    b = rng.standard_normal(C).astype(np.float32) if affine else None

    def run():
        xs = sf.tensor(x, requires_grad=True)
        ws = None if w is None else sf.tensor(w, requires_grad=True)
        bs = None if b is None else sf.tensor(b, requires_grad=True)
        rm, rv = sf.zeros(C), sf.ones(C)
        y = F.batch_norm(xs, rm, rv, ws, bs, training=True, momentum=0.2)
        (y * sf.tensor(g)).sum().backward()
        out = [y.detach().numpy(), xs.grad.numpy(), rm.numpy(), rv.numpy()]
        return out + ([ws.grad.numpy(), bs.grad.numpy()] if affine else [])

    def ref():
        xt = torch.tensor(x.astype(np.float64), requires_grad=True)
        wt = None if w is None else torch.tensor(w.astype(np.float64), requires_grad=True)
        bt = None if b is None else torch.tensor(b.astype(np.float64), requires_grad=True)
        rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
        y = torch.nn.functional.batch_norm(xt, rm, rv, wt, bt, training=True, momentum=0.2)
        (y * torch.tensor(g.astype(np.float64))).sum().backward()
        out = [y.detach().numpy(), xt.grad.numpy(), rm.numpy(), rv.numpy()]
        return out + ([wt.grad.numpy(), bt.grad.numpy()] if affine else [])

    want = ref()
    for got in both_paths(run):
        for a, r in zip(got, want):
            assert a.dtype == np.float32
            np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-5 * max(1.0, np.abs(r).max()))


@needs_kernels
def test_batch_norm_kernel_keeps_nan_where_numpy_does():
    x = np.ones((4, 3, 2), np.float32)
    x[1, 0, 1] = np.nan
    x[2, 2, 0] = np.inf
    with np.errstate(all="ignore"):
        fused, ref = both_paths(lambda: F.batch_norm(sf.tensor(x), None, None,
                                                     training=True).numpy())
    np.testing.assert_array_equal(np.isnan(fused), np.isnan(ref))
    np.testing.assert_array_equal(fused[:, 1], ref[:, 1])
