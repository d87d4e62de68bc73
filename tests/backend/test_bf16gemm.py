"""bf16gemm.c (AVX512-BF16): values against float64 products of the bfloat16 inputs, and
against MKL's gemm_bf16bf16f32 path."""

import ml_dtypes
import numpy as np
import pytest

from shapeflow.backend.cpu import bf16gemm, gemm

BF = ml_dtypes.bfloat16
needs_kernel = pytest.mark.skipif(not bf16gemm.available(),
                                  reason="bf16gemm.c not built or no AVX512-BF16")

SHAPES = [(1, 1, 1), (1, 7, 1), (3, 5, 2), (13, 33, 31), (12, 384, 32), (25, 385, 70),
          (100, 769, 401), (37, 2, 389)]


def _operands(rng, m, k, n, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(BF)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(BF)
    return (a.T if ta else a), (b.T if tb else b)


def _tol(k):
    return 2e-6 * k + 1e-5  # float32 accumulation of k products of unit-size values


@needs_kernel
@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_kernel_matches_float64(m, k, n, ta, tb):
    a, b = _operands(np.random.default_rng(m * 1000 + k + n), m, k, n, ta, tb)
    out = np.zeros((m, n), np.float32)
    bf16gemm.gemm_into(a, b, out)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=_tol(k))


@needs_kernel
def test_kernel_strided_and_accumulates_into_bias():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((40, 90)).astype(BF)[::2, 1::3]  # neither layout cblas takes
    b = rng.standard_normal((60, 50)).astype(BF)[::2, ::-1]
    bias = rng.standard_normal(50).astype(np.float32)
    out = np.broadcast_to(bias, (20, 50)).copy()
    bf16gemm.gemm_into(a, b, out)
    want = a.astype(np.float64) @ b.astype(np.float64) + bias
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=_tol(30))


@needs_kernel
def test_kernel_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        bf16gemm.gemm_into(np.zeros((2, 3), BF), np.zeros((4, 5), BF), np.zeros((2, 5), np.float32))


def _mkl_path(monkeypatch):
    monkeypatch.setitem(bf16gemm._state, "fn", None)


@needs_kernel
@pytest.mark.parametrize("m,k,n", [(64, 65, 64), (129, 256, 70), (256, 1024, 96)])
@pytest.mark.parametrize("bias", [False, True])
def test_half_matmul_kernel_vs_other_path(m, k, n, bias, monkeypatch):
    rng = np.random.default_rng(k)
    a, b = _operands(rng, m, k, n, False, True)  # a Linear's x @ w.T
    c = rng.standard_normal(n).astype(BF) if bias else None
    fast = gemm._half_f32(a, b, c)
    _mkl_path(monkeypatch)
    other = gemm._half_f32(a, b, c)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if bias:
        want += c.astype(np.float64)
    np.testing.assert_allclose(fast, want, rtol=1e-5, atol=_tol(k))
    np.testing.assert_allclose(fast, other, rtol=1e-5, atol=2 * _tol(k))
    rounded = gemm.half_matmul(a, b, c)
    assert rounded.dtype == BF and rounded.shape == (m, n)


@needs_kernel
def test_batched_half_matmul_uses_kernel_and_matches():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 2, 40, 64)).astype(BF)
    b = rng.standard_normal((2, 64, 48)).astype(BF)
    got = gemm._half_f32(a, b, None)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=_tol(64))


def test_switch_turns_kernel_off(monkeypatch):
    monkeypatch.setenv("SHAPEFLOW_BF16GEMM", "0")
    monkeypatch.setitem(bf16gemm._state, "loaded", False)
    assert not bf16gemm.available()
    monkeypatch.delenv("SHAPEFLOW_BF16GEMM")
    bf16gemm._load()  # restore for the tests after this one
