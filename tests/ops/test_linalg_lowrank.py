"""svd_lowrank / pca_lowrank against PyTorch on matrices of rank <= q, where the randomized
results (U V^H, S, and their gradients) do not depend on the sketch; shapes, meta, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.autograd import gradcheck
from shapeflow.errors import ShapeError


def _rank(shape, k, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    *batch, m, n = shape
    return rng.standard_normal((*batch, m, k)) @ rng.standard_normal((*batch, k, n))


CASES = [((5, 4), 2), ((3, 6), 2), ((2, 6, 5), 3), ((4, 4), 4), ((2, 1, 3, 5), 1)]


def _check(s_out, t_out, tol):
    (u, s, v), (tu, ts, tv) = s_out, t_out
    assert [tuple(x.shape) for x in s_out] == [tuple(x.shape) for x in t_out]
    assert all(x.dtype.name == str(y.dtype).split(".")[-1] for x, y in zip(s_out, t_out))
    np.testing.assert_allclose((u @ v.mH).detach().numpy(), (tu @ tv.mH).detach().numpy(),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(s.detach().numpy(), ts.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,k", CASES)
def test_svd_lowrank_as_torch(shape, k, dtype):
    a = _rank(shape, k).astype(dtype)
    tol = 1e-3 if dtype == "float32" else 1e-9
    _check(sf.svd_lowrank(sf.tensor(a), q=k), torch.svd_lowrank(torch.tensor(a), q=k), tol)
    # A - M with M = A - (a rank-k matrix): the same rank-k answer
    b = _rank(shape, k, seed=1).astype(dtype)
    m_ = (a - b)
    _check(sf.svd_lowrank(sf.tensor(a), q=k, M=sf.tensor(m_), niter=1),
           torch.svd_lowrank(torch.tensor(a), q=k, M=torch.tensor(m_), niter=1), 100 * tol)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("shape,k", CASES[:3])
def test_pca_lowrank_as_torch(shape, k, center):
    a = _rank(shape, k)
    _check(sf.pca_lowrank(sf.tensor(a), q=k, center=center),
           torch.pca_lowrank(torch.tensor(a), q=k, center=center), 1e-9)


def test_pca_default_q():
    u, s, v = sf.pca_lowrank(sf.tensor(_rank((8, 10), 7)))
    assert tuple(u.shape) == (8, 6) and tuple(s.shape) == (6,) and tuple(v.shape) == (10, 6)


@pytest.mark.parametrize("fn", ["svd", "pca"])
def test_grad_as_torch(fn):
    a = _rank((5, 4), 2, seed=3)
    s_in = sf.tensor(a, requires_grad=True)
    t_in = torch.tensor(a, requires_grad=True)
    w = np.random.default_rng(4).standard_normal((5, 4))

    def loss(m, x, low):
        u, s, v = low(x, q=2) if fn == "svd" else low(x, q=2, center=True)
        return ((u @ v.mT) * m.tensor(w)).sum() + (s * s).sum()

    loss(sf, s_in, sf.svd_lowrank if fn == "svd" else sf.pca_lowrank).backward()
    loss(torch, t_in, torch.svd_lowrank if fn == "svd" else torch.pca_lowrank).backward()
    np.testing.assert_allclose(s_in.grad.numpy(), t_in.grad.numpy(), rtol=1e-7, atol=1e-8)


def test_gradcheck_with_a_fixed_sketch():
    a = sf.tensor(_rank((4, 5), 4, seed=5), requires_grad=True)

    def fn(x):
        sf.manual_seed(0)
        u, s, v = sf.svd_lowrank(x, q=3, niter=1)
        return (u @ v.mT) * 1.0, s

    assert gradcheck(fn, (a,))


def test_meta():
    a = sf.zeros(2, 7, 5, device="meta", dtype=sf.float64)
    u, s, v = sf.svd_lowrank(a, q=3)
    assert (tuple(u.shape), tuple(s.shape), tuple(v.shape)) == ((2, 7, 3), (2, 3), (2, 5, 3))
    assert u.device.type == "meta" and s.dtype is sf.float64
    u, s, v = sf.pca_lowrank(sf.zeros(5, 7, device="meta"))
    assert (tuple(u.shape), tuple(v.shape)) == ((5, 5), (7, 5))


def test_errors():
    with pytest.raises(ShapeError, match="q"):
        sf.pca_lowrank(sf.zeros(3, 4), q=5)
    with pytest.raises(ValueError, match="niter"):
        sf.svd_lowrank(sf.zeros(3, 4), niter=-1)
    with pytest.raises(ShapeError):
        sf.svd_lowrank(sf.zeros(4))
