"""The cpu table's matmul section: which rung ran (MKL, compiled, NumPy, BLAS sums) is counted."""

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import gemm
from shapeflow.backend.cpu.ladder import CpuKernels
from shapeflow.backend.reference import ReferenceKernels


@pytest.fixture
def table():
    return CpuKernels()  # its own counts, not the shared table's


def _mkl() -> bool:
    return gemm.backend() == "mkl"


def test_a_big_float_product_counts_mkl_or_numpy(table, rng):
    a = rng.standard_normal((64, 64)).astype(np.float32)
    out = table.matmul(a, a)
    np.testing.assert_allclose(out, a @ a, rtol=1e-5, atol=1e-4)
    assert table.stats == {("matmul", "mkl" if _mkl() else "numpy"): 1}


def test_small_and_other_products_count_numpy(table, rng):
    small = rng.standard_normal((4, 4)).astype(np.float32)
    ints = np.arange(16).reshape(4, 4)
    batched = rng.standard_normal((2, 40, 50))
    table.matmul(small, small)  # under MIN_MACS: no MKL
    table.matmul(ints, ints)
    table.matmul(batched, batched.transpose(0, 2, 1))
    assert table.stats == {("matmul", "numpy"): 3}


def test_the_numpy_rung_when_mkl_is_off(table, monkeypatch, rng):
    monkeypatch.setattr(gemm, "_GEMM", {})
    monkeypatch.setattr(gemm, "_state", {"loaded": True})
    a = rng.standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(table.matmul(a, a), np.matmul(a, a))
    assert table.stats == {("matmul", "numpy"): 1}


@pytest.mark.parametrize("kernel", ["matmul", "matmul_bias", "bmm"])
def test_out_is_written_and_returned(table, kernel, rng):
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    out = np.empty((64, 40), np.float32)
    args = (a, b, None) if kernel == "matmul_bias" else (a, b)
    got = getattr(table, kernel)(*args, out=out)
    assert got is out
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-4)


def test_bias_accumulate_and_bmm_count_under_their_names(table, rng):
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 40)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    np.testing.assert_allclose(table.matmul_bias(a, b, bias), a @ b + bias, rtol=1e-5,
                               atol=1e-4)
    acc = np.ones((64, 40), np.float32)
    table.matmul_accumulate(a, b, acc)
    np.testing.assert_allclose(acc, 1 + a @ b, rtol=1e-5, atol=1e-4)
    table.bmm(a[None], b)
    rung = "mkl" if _mkl() else "numpy"
    assert table.stats == {("matmul_bias", rung): 1, ("matmul_accumulate", rung): 1,
                           ("bmm", "numpy"): 1}


def test_a_16_bit_product_counts_the_path_it_took(table, rng):
    a = rng.standard_normal((64, 64)).astype(np.float16)
    out = table.matmul(a, a)
    assert out.dtype == np.float16
    (kernel, path), = table.stats
    assert kernel == "matmul" and path in ("mkl", "compiled", "numpy")


def test_sums_count_blas_or_numpy(table, rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(table.sum(x, (1,)), x.sum(1), rtol=1e-5)  # trailing: gemv
    np.testing.assert_allclose(table.sum(x, (0, 1)), x.sum(), rtol=1e-5)  # all: NumPy's
    np.testing.assert_allclose(table.row_means(x), x.mean(1, keepdims=True), rtol=1e-5)
    table.col_sums(x.astype(np.int64))  # not a float: NumPy's
    assert table.stats == {("sum", "blas"): 1, ("sum", "numpy"): 1, ("row_sums", "blas"): 1,
                           ("col_sums", "numpy"): 1}


def test_the_old_gemm_names_run_through_the_shared_table(rng):
    from shapeflow.backend.cpu import ladder

    ladder.reset_kernel_stats()
    a = rng.standard_normal((64, 64)).astype(np.float32)
    gemm.matmul(a, a)
    gemm.matmul_nd(a, a)
    stats = ladder.kernel_stats()
    assert stats[("matmul_bias", "mkl" if _mkl() else "numpy")] == 1
    assert stats[("bmm", "numpy")] == 1


def test_the_matmul_op_reaches_the_table_above_the_small_size():
    from shapeflow.backend.cpu import ladder

    ladder.reset_kernel_stats()
    x = sf.ones(64, 64, requires_grad=True)
    (x @ x).sum().backward()
    stats = ladder.kernel_stats()
    # forward, and one product per operand's gradient (sum's gradient is a broadcast view,
    # whose zero strides no cblas call takes: those two are NumPy's)
    assert sum(n for (k, _), n in stats.items() if k == "matmul") == 3
    assert stats[("sum", "numpy")] == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_reference_kernels_agree_with_the_cpu_table(dtype, rng):
    ref, cpu = ReferenceKernels(np), CpuKernels()
    a = rng.standard_normal((3, 40, 50)).astype(dtype)
    b = rng.standard_normal((50, 30)).astype(dtype)
    bias = rng.standard_normal(30).astype(dtype)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(ref.matmul(a, b).astype(np.float32),
                               cpu.matmul(a, b).astype(np.float32), rtol=tol, atol=tol)
    np.testing.assert_allclose(ref.matmul_bias(a[0], b, bias).astype(np.float32),
                               cpu.matmul_bias(a[0], b, bias).astype(np.float32), rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(ref.sum(a, (0, 2)).astype(np.float32),
                               cpu.sum(a, (0, 2)).astype(np.float32), rtol=tol, atol=tol)
