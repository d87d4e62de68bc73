"""The float32 GELU kernel (blockwise erfc): accuracy, tails, special values, block edges."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
from shapeflow.backend.reference.elementwise import CHUNK as _CHUNK
from shapeflow.ops.activation import normal_cdf

# a dense grid over the whole float32 range where Phi is not 0 or 1, plus random values
GRID = np.concatenate([np.linspace(-14, 14, 56_001), np.random.default_rng(0).normal(
    0, 3, 20_000)]).astype(np.float32)


def test_normal_cdf_float32_relative_accuracy():
    ref = np.array([0.5 * math.erfc(-float(v) / math.sqrt(2)) for v in GRID])
    got = normal_cdf(GRID).astype(np.float64)
    assert got.dtype == np.float64 and normal_cdf(GRID).dtype == np.float32
    # absolute within 1.5e-7 (table rounding + interpolation), and relative also deep in
    # the negative tail (no 1 - erf cancellation): interpolation error grows as x^2 there
    core = np.abs(GRID) <= 2
    rel = np.abs(got - ref) / ref
    assert np.abs(got - ref).max() < 1.5e-7
    assert rel[core].max() < 1e-6
    assert rel[np.abs(GRID) <= 9].max() < 1.5e-5


@pytest.mark.parametrize("n", [1, 7, _CHUNK, _CHUNK + 3, 2 * _CHUNK + 1])
def test_gelu_float32_matches_torch_across_block_edges(n):
    # the reference is PyTorch in float64 on the same float32 inputs: PyTorch's own float32
    # GELU (1 + erf) is off by up to ~1e-6 in the negative tail, where this kernel is not
    x = np.random.default_rng(n).normal(0, 4, n).astype(np.float32)
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    s = sf.tensor(x, requires_grad=True)
    y, ty = sf.gelu(s), TF.gelu(t)
    assert y.dtype == sf.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=2e-6, atol=2e-7)
    np.testing.assert_allclose(y.detach().numpy(), TF.gelu(torch.tensor(x)).numpy(),
                               rtol=1e-5, atol=2e-6)
    g = np.random.default_rng(1).normal(size=n).astype(np.float32)
    y.backward(sf.tensor(g))
    ty.backward(torch.tensor(g.astype(np.float64)))
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    # and about as close to float64 as PyTorch's own float32 GELU (its error, 1.5x)
    t32 = torch.tensor(x, requires_grad=True)
    y32 = TF.gelu(t32)
    y32.backward(torch.tensor(g))
    ours = np.abs(s.grad.numpy() - t.grad.numpy()).max()
    assert ours <= 1.5 * max(np.abs(t32.grad.numpy() - t.grad.numpy()).max(), 1e-7)
    ours = np.abs(y.detach().numpy() - ty.detach().numpy()).max()
    assert ours <= 1.5 * max(np.abs(y32.detach().numpy() - ty.detach().numpy()).max(), 1e-7)


def test_gelu_float32_sign_selection_and_specials():
    x = np.array([0.0, -0.0, 1e-30, -1e-30, 3.0, -3.0, 20.0, -20.0, np.inf, -np.inf, np.nan],
                 np.float32)
    phi = normal_cdf(x)
    assert phi[0] == phi[1] == np.float32(0.5)
    assert phi[4] > 0.99 and phi[5] < 0.01 and abs(phi[4] + phi[5] - 1) < 1e-7
    assert phi[6] == 1.0 and phi[7] == 0.0 and phi[8] == 1.0 and phi[9] == 0.0
    assert np.isnan(phi[10])
    with np.errstate(invalid="ignore"):  # -inf * Phi(-inf) = -inf * 0, NaN as in PyTorch
        y = sf.gelu(sf.tensor(x)).numpy()
    # as PyTorch in float64: gelu(inf) = inf, gelu(-inf) = NaN (float32 PyTorch gives NaN twice)
    ty = TF.gelu(torch.tensor(x.astype(np.float64))).numpy()
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ty))
    ok = ~np.isnan(y)
    np.testing.assert_allclose(y[ok], ty[ok], rtol=2e-6, atol=1e-7)


def test_gelu_float16_goes_through_float32():
    x = np.linspace(-6, 6, 1001).astype(np.float16)
    y = sf.gelu(sf.tensor(x)).numpy()
    assert y.dtype == np.float16
    ref = TF.gelu(torch.tensor(x.astype(np.float32))).numpy().astype(np.float16)
    np.testing.assert_allclose(y.astype(np.float32), ref.astype(np.float32), rtol=1e-3,
                               atol=1e-3)
