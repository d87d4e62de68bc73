"""bf16gemm.c writing bfloat16 straight from its registers: one rounding of the float32
sum (+ bias), the bits of the float32 path's result narrowed, and no float32 result array."""

import tracemalloc

import ml_dtypes
import numpy as np
import pytest

from shapeflow.backend.cpu import bf16gemm, gemm, kernels

BF = ml_dtypes.bfloat16
pytestmark = pytest.mark.skipif(not bf16gemm.available(),
                                reason="bf16gemm.c not built or no AVX512-BF16")
LAYOUTS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.fixture(autouse=True)
def _kernel_even_with_amx(monkeypatch):
    """On AMX CPUs gemm.py hands bf16 products to MKL: these tests force the kernel there."""
    gemm.bf16_kernel()  # loads gemm's state, the CPU's AMX flag included
    monkeypatch.setitem(gemm._state, "amx", False)


def _operands(rng, m, k, n, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(BF)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(BF)
    return (a.T if ta else a), (b.T if tb else b)


def _via_float32(a, b, bias):
    """The float32 path: bias-filled float32 C, the blocked kernel adds, then narrow."""
    out = np.zeros((a.shape[0], b.shape[1]), np.float32) if bias is None else \
        np.broadcast_to(bias, (a.shape[0], b.shape[1])).copy()
    bf16gemm.gemm_into(a, b, out)
    return kernels.narrow(out, BF)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 33, 31), (12, 384, 32), (25, 7, 70),
                                   (70, 2, 65), (37, 383, 1)])
@pytest.mark.parametrize("ta,tb", LAYOUTS)
@pytest.mark.parametrize("with_bias", [False, True])
def test_same_bits_as_the_float32_path_up_to_one_k_block(m, k, n, ta, tb, with_bias):
    rng = np.random.default_rng(m * 7 + k + n)
    a, b = _operands(rng, m, k, n, ta, tb)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    got = bf16gemm.matmul_bf16(a, b, bias)
    assert got.dtype == BF and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint16), _via_float32(a, b, bias).view(np.uint16))


@pytest.mark.parametrize("m,k,n", [(30, 385, 33), (100, 1001, 64), (5, 4097, 40)])
@pytest.mark.parametrize("ta,tb", LAYOUTS)
def test_long_sums_round_the_float64_product(m, k, n, ta, tb):
    """Past one k block the float32 sums differ in order from the blocked path's; both are
    within float32 accumulation of the float64 product, rounded once."""
    rng = np.random.default_rng(k)
    a, b = _operands(rng, m, k, n, ta, tb)
    bias = rng.standard_normal(n).astype(np.float32)
    got = bf16gemm.matmul_bf16(a, b, bias).astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64) + bias
    sums = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert (np.abs(got - want) <= np.abs(want) * 2.0 ** -8 + sums * k * 2.0 ** -24).all()


def test_strided_operands_and_special_values():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((40, 90)).astype(BF)[::2, 1::3]  # neither layout a gemm takes
    b = rng.standard_normal((60, 50)).astype(BF)[::2, ::-1]
    a[0, 0], a[1, 1], a[2, 2] = np.nan, np.inf, -np.inf
    bias = rng.standard_normal(50).astype(np.float32)
    bias[3] = np.nan
    got = bf16gemm.matmul_bf16(a, b, bias)
    np.testing.assert_array_equal(got.view(np.uint16), _via_float32(a, b, bias).view(np.uint16))
    assert np.isnan(got[0].astype(np.float32)).all() and np.isnan(got[:, 3].astype(
        np.float32)).all()


def test_an_output_view_with_a_row_stride():
    rng = np.random.default_rng(3)
    a, b = _operands(rng, 20, 50, 30, False, True)
    big = np.zeros((20, 40), BF)
    assert bf16gemm.matmul_bf16(a, b, None, big[:, 5:35]) is not None
    np.testing.assert_array_equal(big[:, 5:35].view(np.uint16),
                                  _via_float32(a, b, None).view(np.uint16))
    assert not big[:, :5].astype(np.float32).any() and not big[:, 35:].astype(np.float32).any()


def test_half_matmul_makes_no_float32_result():
    rng = np.random.default_rng(4)
    a, b = _operands(rng, 512, 256, 512, True, False)
    bias = rng.standard_normal(512).astype(BF)
    gemm.half_matmul(a, b, bias)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        out = gemm.half_matmul(a, b, bias)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert out.dtype == BF and peak < out.nbytes + 512 * 4 + 4096  # + the float32 bias
    want = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2 ** -7, atol=1e-3)


def test_batched_and_folded_products_round_once():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 40, 64)).astype(BF)
    b2 = rng.standard_normal((64, 48)).astype(BF)
    b3 = rng.standard_normal((3, 64, 48)).astype(BF)
    for b in (b2, b3):
        got = gemm.half_matmul(a, b)
        want = np.stack([_via_float32(a[i], b if b.ndim == 2 else b[i], None)
                         for i in range(3)])
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_beyond_the_longest_sum_it_declines_and_the_float32_path_runs():
    rng = np.random.default_rng(6)
    a, b = _operands(rng, 16, 32770, 32, False, False)
    assert bf16gemm.matmul_bf16(a, b) is None
    out = gemm.half_matmul(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    sums = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    assert (np.abs(out.astype(np.float64) - want) <= np.abs(want) * 2.0 ** -8 +
            sums * 2.0 ** -13).all()


def test_with_amx_tiles_mkl_takes_the_products(monkeypatch):
    """AMX runs MKL's bf16 gemm several times faster than this kernel: MKL gets them."""
    if gemm._HALF_GEMM[gemm._BF16] is None:
        pytest.skip("MKL's gemm_bf16bf16f32 is not loaded")
    monkeypatch.setitem(gemm._state, "amx", True)
    assert not gemm.bf16_kernel() and "mkl" in gemm.half_backend()
    rng = np.random.default_rng(7)
    a, b = _operands(rng, 64, 96, 48, True, False)
    got = gemm.half_matmul(a, b).astype(np.float64)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2.0 ** -8, atol=1e-4)
