"""geqrf, linalg.householder_product (orgqr) and ormqr against PyTorch: LAPACK's reflector
and tau conventions, batching, real and complex dtypes, gradients, meta, and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.autograd import gradcheck
from shapeflow.errors import DTypeError, GraphError, ShapeError

DTYPES = ["float32", "float64", "complex64", "complex128"]
SHAPES = [(5, 5), (6, 4), (3, 6), (2, 4, 3), (2, 1, 3, 3), (1, 1), (0, 3), (3, 0), (0, 4, 2)]


def _mat(shape, dtype="float64", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _close(s, t, dtype):
    tol = 1e-5 if dtype in ("float32", "complex64") else 1e-12
    assert s.dtype.name == str(t.dtype).split(".")[-1] and tuple(s.shape) == tuple(t.shape)
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_geqrf_and_householder_product_as_torch(shape, dtype):
    a = _mat(shape, dtype)
    r, tau = sf.geqrf(sf.tensor(a))
    tr, tt = torch.geqrf(torch.tensor(a))
    _close(r, tr, dtype)
    _close(tau, tt, dtype)
    k = min(shape[-2:])
    q = sf.linalg.householder_product(r[..., :, :k], tau)
    _close(q, torch.linalg.householder_product(tr[..., :, :k], tt), dtype)
    assert sf.orgqr is sf.linalg.householder_product
    _close(sf.tensor(a[..., :, :k]).orgqr(tau), torch.tensor(a[..., :, :k]).orgqr(tt), dtype)


def test_geqrf_zero_column_has_zero_tau():
    a = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 3.0]])
    r, tau = sf.geqrf(sf.tensor(a))
    tr, tt = torch.geqrf(torch.tensor(a))
    np.testing.assert_allclose(tau.numpy(), tt.numpy(), atol=1e-12)
    np.testing.assert_allclose(r.numpy(), tr.numpy(), atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("mn", [(5, 3), (3, 5), (4, 4), (4, 0)])
def test_ormqr_as_torch(mn, left, transpose, dtype):
    m, n = mn
    a = _mat((2, m, n), dtype, seed=1)
    tr, tt = torch.geqrf(torch.tensor(a))
    c = _mat((2, m, 3) if left else (2, 3, m), dtype, seed=2)
    got = sf.ormqr(sf.tensor(tr.numpy()), sf.tensor(tt.numpy()), sf.tensor(c), left, transpose)
    _close(got, torch.ormqr(tr, tt, torch.tensor(c), left, transpose), dtype)


def _grads_match(fn_sf, fn_t, arrays, seed=0):
    s_in = [sf.tensor(x, requires_grad=True) for x in arrays]
    t_in = [torch.tensor(x, requires_grad=True) for x in arrays]
    s_out, t_out = fn_sf(*s_in), fn_t(*t_in)
    cot = _mat(tuple(t_out.shape), str(t_out.dtype).split(".")[-1], seed=seed + 9)
    (s_out * sf.tensor(cot).conj()).real.sum().backward()
    (t_out * torch.tensor(cot).conj()).real.sum().backward()
    for s, t in zip(s_in, t_in):
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("shape,k", [((4, 4), 4), ((5, 3), 2), ((2, 4, 3), 3)])
def test_householder_product_grad_as_torch(shape, k, dtype):
    a, tau = _mat(shape, dtype, 3), _mat(shape[:-2] + (k,), dtype, 4) * 0.5
    _grads_match(sf.linalg.householder_product, torch.linalg.householder_product, [a, tau])


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr_grad_as_torch(left, transpose, dtype):
    a, tau = _mat((2, 4, 3), dtype, 5), _mat((2, 3), dtype, 6) * 0.5
    c = _mat((2, 4, 2) if left else (2, 2, 4), dtype, 7)
    _grads_match(lambda x, t, o: sf.ormqr(x, t, o, left, transpose),
                 lambda x, t, o: torch.ormqr(x, t, o, left, transpose), [a, tau, c])


def test_gradcheck():
    a = sf.tensor(_mat((4, 3), seed=8), requires_grad=True)
    tau = sf.tensor(_mat((3,), seed=9) * 0.5, requires_grad=True)
    c = sf.tensor(_mat((3, 4), seed=10), requires_grad=True)
    assert gradcheck(sf.linalg.householder_product, (a, tau))
    assert gradcheck(lambda x, t, o: sf.ormqr(x, t, o, False, True), (a, tau, c))


def test_geqrf_has_no_derivative_as_torch():
    a = sf.tensor(_mat((3, 3)), requires_grad=True)
    r, _ = sf.geqrf(a)
    with pytest.raises(GraphError, match="geqrf"):
        r.sum().backward()


def test_meta():
    a = sf.zeros(2, 5, 3, device="meta", dtype=sf.float64, requires_grad=True)
    r, tau = sf.geqrf(a)
    assert tuple(r.shape) == (2, 5, 3) and tuple(tau.shape) == (2, 3) and r.device.type == "meta"
    t = sf.zeros(2, 3, device="meta", dtype=sf.float64, requires_grad=True)
    q = sf.linalg.householder_product(a, t)
    assert tuple(q.shape) == (2, 5, 3) and q.dtype is sf.float64
    q.sum().backward()
    assert tuple(a.grad.shape) == (2, 5, 3)
    c = sf.zeros(2, 4, 5, device="meta", dtype=sf.float64)
    assert tuple(sf.ormqr(a, t, c, left=False).shape) == (2, 4, 5)


def test_errors():
    hp = sf.linalg.householder_product
    with pytest.raises(ShapeError, match="greater than or equal to input.shape"):
        hp(sf.zeros(3, 4), sf.zeros(2))
    with pytest.raises(ShapeError, match="tau.shape"):
        hp(sf.zeros(4, 3), sf.zeros(4))
    with pytest.raises(ShapeError, match="batch dimensions of tau"):
        hp(sf.zeros(2, 4, 3), sf.zeros(3, 2))
    with pytest.raises(DTypeError, match="tau dtype"):
        hp(sf.zeros(4, 3), sf.zeros(2, dtype=sf.float64))
    with pytest.raises(ShapeError):
        hp(sf.zeros(3), sf.zeros(2))
    with pytest.raises(DTypeError):
        sf.geqrf(sf.zeros(3, 3, dtype=sf.int64))
    with pytest.raises(ShapeError):
        sf.geqrf(sf.zeros(3))
    with pytest.raises(ShapeError, match="min"):
        sf.ormqr(sf.zeros(4, 3), sf.zeros(4), sf.zeros(4, 2))
    with pytest.raises(ShapeError, match="input.shape\\[-2\\]"):
        sf.ormqr(sf.zeros(4, 3), sf.zeros(3), sf.zeros(3, 2))
    with pytest.raises(ShapeError, match="same number of dimensions"):
        sf.ormqr(sf.zeros(2, 4, 3), sf.zeros(2, 3), sf.zeros(4, 2))
    with pytest.raises(DTypeError, match="same dtype"):
        sf.ormqr(sf.zeros(4, 3), sf.zeros(3), sf.zeros(4, 2, dtype=sf.float64))
