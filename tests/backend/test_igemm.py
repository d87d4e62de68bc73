"""int8 x int8 -> int32 products: bit-exact against an int64 reference on both paths."""

from __future__ import annotations

import numpy as np
import pytest

from shapeflow.backend import igemm


@pytest.fixture(params=["default", "numpy"])
def path(request, monkeypatch):
    """Each test on the path this machine picks (MKL where it loads) and on NumPy's."""
    if request.param == "numpy":
        monkeypatch.setenv("SHAPEFLOW_BLAS", "numpy")
    monkeypatch.setattr(igemm, "_state", {"loaded": False, "fn": None})
    igemm._load()
    if request.param == "numpy":
        assert igemm.backend() == "numpy"
    return request.param


def _ref(a, w):
    return a.astype(np.int64) @ w.astype(np.int64).T


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (64, 256, 96), (17, 1000, 33),
                                   (130, 64, 1)])
def test_bit_exact_random(path, m, k, n):
    rng = np.random.default_rng(m * k + n)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    out = igemm.int8_matmul(a, w)
    assert out.dtype == np.int32 and out.shape == (m, n)
    np.testing.assert_array_equal(out, _ref(a, w))
    np.testing.assert_array_equal(igemm.int8_matmul(a, w, igemm.weight_correction(w)),
                                  _ref(a, w))


def test_bit_exact_extremes(path):
    """-128 x -128 over a long k: the largest sums; pairs that would saturate int16."""
    k = 4096
    for va, vw in ((-128, -128), (127, -128), (-128, 127), (127, 127)):
        a = np.full((4, k), va, np.int8)
        w = np.full((3, k), vw, np.int8)
        np.testing.assert_array_equal(igemm.int8_matmul(a, w), _ref(a, w))
        assert igemm.int8_matmul(a, w)[0, 0] == va * vw * k


def test_non_contiguous_and_empty(path):
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (20, 40), dtype=np.int8)[::2, ::2]  # [10, 20]
    w = rng.integers(-128, 128, (20, 80), dtype=np.int8).T[::2]  # [40, 20], strided
    np.testing.assert_array_equal(igemm.int8_matmul(a, w), _ref(a, w))
    assert igemm.int8_matmul(np.zeros((0, 4), np.int8), np.zeros((3, 4), np.int8)).shape == (0, 3)
    np.testing.assert_array_equal(
        igemm.int8_matmul(np.zeros((2, 0), np.int8), np.zeros((3, 0), np.int8)), np.zeros((2, 3)))


def test_rejects_other_dtypes():
    with pytest.raises(ValueError, match="int8"):
        igemm.int8_matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.int8))
    with pytest.raises(ValueError, match="int8"):
        igemm.int8_matmul(np.zeros((2, 3), np.int8), np.zeros((2, 2), np.int8))


def test_mkl_is_used_where_it_loads():
    igemm._load()
    from shapeflow.backend import gemm

    if gemm._find_mkl() is None:
        pytest.skip("no MKL in this environment")
    assert igemm.backend() == "mkl"
