"""linalg.eig / linalg.eigvals against PyTorch: complex values, eigenvector normalization,
batching, dtypes, gradients (real and complex inputs), meta, and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.autograd import gradcheck
from shapeflow.errors import DTypeError, GraphError, ShapeError


def _mat(shape, dtype="float64", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _tol(dtype: str) -> float:
    return 1e-4 if dtype in ("float32", "complex64") else 1e-9


SHAPES = [(1, 1), (3, 3), (5, 5), (2, 4, 4), (2, 1, 3, 3), (0, 3, 3), (2, 0, 0)]
DTYPES = ["float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_eig_values_as_torch(shape, dtype):
    a = _mat(shape, dtype)
    w, v = sf.linalg.eig(sf.tensor(a))
    tw, tv = torch.linalg.eig(torch.tensor(a))
    assert w.dtype.name == str(tw.dtype).split(".")[-1] and tuple(w.shape) == tuple(tw.shape)
    assert v.dtype.name == str(tv.dtype).split(".")[-1] and tuple(v.shape) == tuple(tv.shape)
    tol = _tol(dtype)
    np.testing.assert_allclose(w.numpy(), tw.numpy(), rtol=tol, atol=tol)
    # the vectors agree up to each column's phase: their moduli, and A V = V diag(L)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), rtol=tol, atol=tol)
    np.testing.assert_allclose(a @ v.numpy(), v.numpy() * w.numpy()[..., None, :],
                               rtol=10 * tol, atol=10 * tol)
    np.testing.assert_allclose(np.linalg.norm(v.numpy(), axis=-2), 1.0, atol=tol)
    ev = sf.linalg.eigvals(sf.tensor(a))
    assert ev.dtype is w.dtype
    np.testing.assert_allclose(ev.numpy(), tw.numpy(), rtol=tol, atol=tol)


def test_real_eigenvalues_still_complex():
    a = np.diag([3.0, 1.0, 2.0]).astype("float32")
    w, v = sf.linalg.eig(sf.tensor(a))
    assert w.dtype is sf.complex64 and v.dtype is sf.complex64
    np.testing.assert_allclose(w.numpy(), torch.linalg.eig(torch.tensor(a))[0].numpy())


def _phase_free(m, a):
    """A real loss of eig's outputs that does not depend on the eigenvectors' phases."""
    w, v = m.linalg.eig(a)
    return (w.real * 1.5 - w.imag * 0.5).sum() + (v.abs() * m.arange(a.shape[-1]).to(
        v.abs().dtype)).sum()


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eig_grad_as_torch(shape, dtype):
    a = _mat(shape, dtype, seed=3)
    s = sf.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    _phase_free(sf, s).backward()
    _phase_free(torch, t).backward()
    assert s.grad.dtype.name == dtype
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("which", ["values", "vectors", "eigvals"])
def test_eig_gradcheck(which):
    a = sf.tensor(_mat((4, 4), seed=5), requires_grad=True)
    fns = {"values": lambda x: sf.view_as_real(sf.linalg.eig(x).eigenvalues),
           "vectors": lambda x: sf.linalg.eig(x).eigenvectors.abs(),
           "eigvals": lambda x: sf.view_as_real(sf.linalg.eigvals(x))}
    assert gradcheck(fns[which], (a,))


def test_eigvals_grad_as_torch():
    a = _mat((2, 3, 3), seed=7)
    s = sf.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    (sf.linalg.eigvals(s).real * 2 + sf.linalg.eigvals(s).imag).sum().backward()
    (torch.linalg.eigvals(t).real * 2 + torch.linalg.eigvals(t).imag).sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_phase_dependent_loss_refused_as_torch():
    a = _mat((3, 3), "complex128", seed=1)
    s = sf.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError):
        torch.linalg.eig(t)[1].real.sum().backward()
    with pytest.raises(GraphError, match="phase"):
        sf.linalg.eig(s)[1].real.sum().backward()


def test_meta_and_saved():
    a = sf.zeros(2, 5, 5, device="meta", dtype=sf.float64, requires_grad=True)
    w, v = sf.linalg.eig(a)
    assert tuple(w.shape) == (2, 5) and w.dtype is sf.complex128 and w.device.type == "meta"
    assert tuple(v.shape) == (2, 5, 5) and v.dtype is sf.complex128
    ev = sf.linalg.eigvals(sf.zeros(3, 3, device="meta"))
    assert tuple(ev.shape) == (3,) and ev.dtype is sf.complex64


def test_errors():
    with pytest.raises(ShapeError, match="square"):
        sf.linalg.eig(sf.zeros(2, 3))
    with pytest.raises(ShapeError):
        sf.linalg.eigvals(sf.zeros(3))
    with pytest.raises(DTypeError):
        sf.linalg.eig(sf.zeros(3, 3, dtype=sf.int64))
    with pytest.raises(RuntimeError, match="infs or NaNs"):
        sf.linalg.eig(sf.tensor([[1.0, float("nan")], [0.0, 1.0]]))


def test_eigvals_of_non_finite_is_nan_as_torch():
    a = _mat((3, 2, 2), "float32")
    a[1, 0, 0] = np.inf
    got = sf.linalg.eigvals(sf.tensor(a)).numpy()
    want = torch.linalg.eigvals(torch.tensor(a)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
