"""SiLU's compiled pass and one-op backward: PyTorch's values, the NumPy fallback's, meta."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.backend.cpu import norm_act_kernels
from shapeflow.nn import functional as F
from shapeflow.ops.base import held

SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 20.0, -20.0, 88.0, -88.0,
            -90.0, -103.0, -104.5, -1.2785, 3e38, -3e38]


def _both(fn):
    """fn() with the compiled SiLU kernels, then with NumPy alone."""
    fused = fn()
    old = norm_act_kernels.set_enabled(False)
    try:
        return fused, fn()
    finally:
        norm_act_kernels.set_enabled(old)


def _data(rng, dtype, n=4099):
    # specials in several lanes of the 16-wide loop, then a spread that reaches the tails
    x = np.concatenate([SPECIALS, np.ones(5), SPECIALS, rng.standard_normal(n) * 12.0])
    return x.astype(dtype), rng.standard_normal(x.shape).astype(dtype)


def _run(a, g, dtype=sf.float32):
    x = sf.tensor(a, requires_grad=True)
    y = F.silu(x)
    y.backward(sf.tensor(g))
    return y.detach().numpy(), x.grad.numpy()


def _torch(a, g):
    x = torch.tensor(a, requires_grad=True)
    y = torch.nn.functional.silu(x)
    y.backward(torch.tensor(g))
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_and_backward_match_pytorch_on_both_paths(dtype, rng):
    a, g = _data(rng, dtype)
    want_y, want_g = _torch(a, g)
    tol = dict(rtol=4e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-15)
    for y, dx in _both(lambda: _run(a, g)):
        assert y.dtype == dtype and dx.dtype == dtype
        np.testing.assert_allclose(y, want_y, **tol)  # NaN exactly where PyTorch has NaN
        np.testing.assert_allclose(dx, want_g, **tol)


def test_kernel_agrees_with_the_numpy_fallback(rng):
    if not norm_act_kernels.available():
        pytest.skip("compiled SiLU kernels not built")
    a, g = _data(rng, np.float32, 70001)
    (y1, g1), (y2, g2) = _both(lambda: _run(a, g))
    np.testing.assert_allclose(y1, y2, rtol=5e-7, atol=1e-37)  # 2 ulp each way
    np.testing.assert_allclose(g1, g2, rtol=3e-6, atol=3e-7)  # d silu crosses 0 at -1.28


def test_subnormal_tail_matches_float64():
    # below x = -87.3 exp(x) is subnormal: the kernel keeps it, as PyTorch's exp does (NumPy's
    # 1 / (1 + exp(-x)) overflows there and gives 0)
    if not norm_act_kernels.available():
        pytest.skip("compiled SiLU kernels not built")
    x = np.linspace(-103.0, -86.0, 4001).astype(np.float32)
    exact = x.astype(np.float64) / (1.0 + np.exp(-x.astype(np.float64)))
    y = F.silu(sf.tensor(x)).numpy()
    normal = np.abs(exact) > np.finfo(np.float32).tiny
    np.testing.assert_allclose(y[normal], exact[normal], rtol=1e-5)
    # subnormal e = exp(x) is a multiple of 2^-149: times |x| <= 103 that is the error left
    np.testing.assert_allclose(y, exact, atol=2e-43)


def test_non_contiguous_and_broadcast_gradients(rng):
    a = rng.standard_normal((6, 10)).astype(np.float32)
    x = sf.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    (F.silu(x.t()) * sf.tensor(np.arange(6, dtype=np.float32))).sum().backward()
    (torch.nn.functional.silu(tx.t()) * torch.arange(6.0)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_backward_is_one_op_and_grad_of_grad_stays_composite(rng):
    a = rng.standard_normal((4, 5))
    x = sf.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    y = F.silu(x)
    assert [e.kind for e, _ in held(y.grad_fn)] == ["activation inputs"]  # x, as declared
    (gx,) = sf.autograd.grad(y.sum(), x, create_graph=True)
    (tgx,) = torch.autograd.grad(torch.nn.functional.silu(tx).sum(), tx, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-12)
    gx.sum().backward()
    tgx.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_backward_node_count(rng):
    # without create_graph the backward of silu runs one op (silu_backward), not six
    from shapeflow.ops.activation import gated as activations

    names = []
    old = activations.apply
    x = sf.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    y = F.silu(x)

    def spy(op, *inputs):
        names.append(op.name)
        return old(op, *inputs)

    activations.apply = spy
    try:
        y.backward(sf.ones_like(y))
    finally:
        activations.apply = old
    assert names == ["silu_backward"]


def test_meta_shapes_without_data():
    x = sf.empty(3, 7, device="meta", requires_grad=True)
    y = F.silu(x)
    assert y.shape == (3, 7) and y.device.type == "meta"
    y.sum().backward()
    assert x.grad.shape == (3, 7) and x.grad.device.type == "meta"


def test_half_precision_keeps_its_path():
    a = np.linspace(-6, 6, 37)
    x = sf.tensor(a, dtype=sf.bfloat16, requires_grad=True)
    tx = torch.tensor(a, dtype=torch.bfloat16, requires_grad=True)
    y, ty = F.silu(x), torch.nn.functional.silu(tx)
    np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(),
                               rtol=8e-3, atol=1e-3)
    y.sum().backward()
    assert x.grad.dtype is sf.bfloat16
