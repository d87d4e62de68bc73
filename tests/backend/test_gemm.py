"""backend.gemm: MKL's gemm where it applies, np.matmul elsewhere; the same values either way."""

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shapeflow.backend.cpu import gemm


def _layout(a: np.ndarray, kind: str) -> np.ndarray:
    """The same values as a, stored C-order, F-order, or as a strided slice of a bigger one."""
    if kind == "C":
        return np.ascontiguousarray(a)
    if kind == "F":
        return np.asfortranarray(a)
    big = np.zeros((a.shape[0] * 2, a.shape[1] + 3), a.dtype)
    big[::2, 1:-2] = a
    return big[::2, 1:-2]  # rows 2 apart, an offset start: strides no BLAS call takes as is


def test_mkl_is_used_when_installed():
    if gemm._find_mkl() is None or os.environ.get("SHAPEFLOW_BLAS") == "numpy":
        pytest.skip("the mkl package is not installed, or NumPy's BLAS was asked for")
    assert gemm.backend() == "mkl"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la", ["C", "F", "S"])
@pytest.mark.parametrize("lb", ["C", "F", "S"])
def test_layouts_match_numpy(dtype, la, lb, rng):
    a = rng.standard_normal((64, 48)).astype(dtype)
    b = rng.standard_normal((48, 40)).astype(dtype)
    out = gemm.matmul(_layout(a, la), _layout(b, lb))
    assert out.dtype == dtype and out.shape == (64, 40) and out.flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, a @ b, rtol=tol, atol=tol)


@given(m=st.integers(0, 70), k=st.integers(0, 70), n=st.integers(0, 70),
       ta=st.booleans(), tb=st.booleans())
def test_shapes_match_numpy(m, k, n, ta, tb):
    rng = np.random.default_rng(m * 10000 + k * 100 + n)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    a, b = (a.T if ta else a), (b.T if tb else b)
    np.testing.assert_allclose(gemm.matmul(a, b), np.matmul(a, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("a_shape,b_shape", [((3, 40, 50), (3, 50, 60)), ((40, 50), (50,)),
                                             ((2, 1, 40, 50), (3, 50, 60))])
def test_other_ranks_go_to_numpy(a_shape, b_shape, rng):
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    np.testing.assert_allclose(gemm.matmul(a, b), np.matmul(a, b), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int64, np.complex64])  # 16-bit: test_gemm_half
def test_other_dtypes_go_to_numpy(dtype, rng):
    a = (rng.standard_normal((40, 50)) * 4).astype(dtype)
    b = (rng.standard_normal((50, 60)) * 4).astype(dtype)
    out = gemm.matmul(a, b)
    assert out.dtype == np.matmul(a, b).dtype
    np.testing.assert_array_equal(out, np.matmul(a, b))


def test_numpy_only_when_asked(monkeypatch):
    monkeypatch.setenv("SHAPEFLOW_BLAS", "numpy")
    monkeypatch.setattr(gemm, "_GEMM", {})
    monkeypatch.setattr(gemm, "_state", {"loaded": False})
    assert gemm.backend() == "numpy"
    a = np.ones((64, 64), np.float32)
    np.testing.assert_array_equal(gemm.matmul(a, a), np.full((64, 64), 64, np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("lb", ["C", "F"])
def test_bias_is_added_once_to_every_row(dtype, lb, rng):
    a = rng.standard_normal((64, 48)).astype(dtype)
    b = rng.standard_normal((48, 40)).astype(dtype)
    bias = rng.standard_normal(40).astype(dtype)
    out = gemm.matmul(a, _layout(b, lb), bias)
    tol = {np.float32: 1e-5, np.float64: 1e-12, np.float16: 2e-2}[dtype]
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * 10)
    assert out.dtype == dtype
