"""backend.gemm for bfloat16/float16: float32 accumulate, one rounding, PyTorch's values."""

import ml_dtypes
import numpy as np
import pytest
import torch

from shapeflow.backend.cpu import gemm
from tests.backend.test_gemm import _layout

BF16 = np.dtype(ml_dtypes.bfloat16)
_TORCH = {BF16: torch.bfloat16, np.dtype(np.float16): torch.float16}
HALVES = [BF16, np.dtype(np.float16)]


def _half(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def _torch(a):
    return torch.from_numpy(np.ascontiguousarray(a).astype(np.float32)).to(_TORCH[a.dtype])


def _rounded_f32(a, b, bias=None):
    """The exact float32-accumulated product rounded once (float64 sum: order-free)."""
    out = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        out = out + bias.astype(np.float64)
    return out.astype(np.float32).astype(a.dtype)


def _ulps(x, ref, dtype):
    """Distance in units of the 16-bit dtype's spacing at ref."""
    x, ref = x.astype(np.float64), ref.astype(np.float64)
    eps = float(ml_dtypes.finfo(dtype).eps)
    return np.abs(x - ref) / np.maximum(np.abs(ref) * eps, float(ml_dtypes.finfo(dtype).tiny))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("m,k,n", [(64, 48, 40), (128, 200, 96), (7, 13, 5), (33, 257, 65),
                                   (256, 1000, 3)])
def test_2d_matches_torch(dtype, m, k, n, rng):
    a, b = _half(rng, (m, k), dtype), _half(rng, (k, n), dtype)
    out = gemm.matmul(a, b)
    assert out.dtype == dtype and out.shape == (m, n)
    ref = (_torch(a) @ _torch(b)).float().numpy()
    # float32 accumulation in another order can move a rounding boundary: one ulp, rarely
    assert _ulps(out, ref, dtype).max() <= 1
    assert (out.astype(np.float32) != ref).mean() < 0.01
    assert _ulps(out, _rounded_f32(a, b), dtype).max() <= 1


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("la", ["C", "F", "S"])
@pytest.mark.parametrize("lb", ["C", "F", "S"])
def test_layouts_and_bias(dtype, la, lb, rng):
    a, b, bias = _half(rng, (64, 48), dtype), _half(rng, (48, 40), dtype), _half(rng, 40, dtype)
    out = gemm.matmul(_layout(a, la), _layout(b, lb), bias)
    assert out.dtype == dtype and out.flags.c_contiguous
    ref = torch.addmm(_torch(bias), _torch(a), _torch(b)).float().numpy()
    assert _ulps(out, ref, dtype).max() <= 1
    assert _ulps(out, _rounded_f32(a, b, bias), dtype).max() <= 1


@pytest.mark.parametrize("rows", [16, 2])  # through MKL, and below its size threshold
def test_bias_is_added_before_rounding(rows):
    # the product 1 + 2^-9 rounds to 1 in bf16; with the bias 2^-8 the float32 sum
    # 1 + 2^-8 + 2^-9 rounds up to 1 + 2^-7, where two roundings give 1 (a tie, to even)
    a = np.zeros((rows, 64), BF16)
    a[:, 0], a[:, 1] = 1.0, 2.0**-9
    b = np.ones((64, 64), BF16)
    bias = np.full(64, 2.0**-8, BF16)
    assert float(gemm.matmul(a, b)[0, 0]) == 1.0
    assert float(gemm.matmul(a, b, bias)[0, 0]) == 1 + 2.0**-7


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("sa,sb", [((3, 40, 50), (3, 50, 60)), ((2, 1, 40, 50), (3, 50, 60)),
                                   ((40, 50), (4, 50, 30)), ((5, 8, 16), (5, 16, 4))])
def test_batched_matches_torch(dtype, sa, sb, rng):
    a, b = _half(rng, sa, dtype), _half(rng, sb, dtype)
    out = gemm.matmul(a, b)
    ref = torch.matmul(_torch(a), _torch(b)).float().numpy()
    assert out.dtype == dtype and out.shape == ref.shape
    assert _ulps(out, ref, dtype).max() <= 1


@pytest.mark.parametrize("dtype", HALVES)
def test_batched_transposed_operands(dtype, rng):
    a = _half(rng, (6, 50, 40), dtype).transpose(0, 2, 1)  # [6, 40, 50], column-major mats
    b = _half(rng, (6, 60, 50), dtype)[:, ::2].transpose(0, 2, 1)  # strided, transposed
    out = gemm.matmul(a, b)
    ref = torch.matmul(_torch(a), _torch(b)).float().numpy()
    assert _ulps(out, ref, dtype).max() <= 1


@pytest.mark.parametrize("dtype", HALVES)
def test_fallback_without_mkl_rounds_once(dtype, rng, monkeypatch):
    monkeypatch.setattr(gemm, "_HALF_GEMM", {BF16: None, np.dtype(np.float16): None})
    monkeypatch.setattr(gemm, "_GEMM", {})
    monkeypatch.setattr(gemm, "_state", {"loaded": True})
    a, b, bias = _half(rng, (70, 90), dtype), _half(rng, (90, 33), dtype), _half(rng, 33, dtype)
    out = gemm.matmul(a, b, bias)
    assert out.dtype == dtype
    assert _ulps(out, _rounded_f32(a, b, bias), dtype).max() <= 1
    batched = gemm.matmul(_half(rng, (3, 20, 30), dtype), _half(rng, (30, 10), dtype))
    assert batched.dtype == dtype and batched.shape == (3, 20, 10)


def test_numpy_blas_env_uses_the_fallback(rng, monkeypatch):
    monkeypatch.setenv("SHAPEFLOW_BLAS", "numpy")
    monkeypatch.setattr(gemm, "_GEMM", {})
    monkeypatch.setattr(gemm, "_HALF_GEMM", {BF16: None, np.dtype(np.float16): None})
    monkeypatch.setattr(gemm, "_state", {"loaded": False})
    assert gemm.backend() == "numpy"
    a = np.ones((64, 64), BF16)
    out = gemm.matmul(a, a)
    assert out.dtype == BF16 and float(out[3, 5]) == 64.0


def test_mkl_half_gemm_is_loaded_with_mkl():
    if gemm.backend() != "mkl":
        pytest.skip("MKL is not in use")
    assert gemm._HALF_GEMM[BF16] is not None and gemm._HALF_GEMM[np.dtype(np.float16)] is not None


def test_never_numpy_matmul_on_16_bit_arrays(rng, monkeypatch):
    """ml_dtypes' bf16 matmul is very slow and returns float32: no product may reach it."""
    real = np.matmul

    def guarded(a, b, *args, **kw):
        assert a.dtype.itemsize != 2 and b.dtype.itemsize != 2, "np.matmul on 16-bit arrays"
        return real(a, b, *args, **kw)

    monkeypatch.setattr(gemm.np, "matmul", guarded)
    for dtype in HALVES:
        for sa, sb in (((8, 9), (9, 7)), ((80, 90), (90, 70)), ((3, 8, 9), (9, 7))):
            out = gemm.matmul(_half(rng, sa, dtype), _half(rng, sb, dtype))
            assert out.dtype == dtype
        acc = np.zeros((80, 70), dtype)
        gemm.matmul_acc(_half(rng, (80, 90), dtype), _half(rng, (90, 70), dtype), acc)
        assert acc.dtype == dtype and np.abs(acc.astype(np.float32)).max() > 0


@pytest.mark.parametrize("dtype", HALVES)
def test_matmul_acc_adds_in_float32(dtype, rng):
    a, b = _half(rng, (64, 80), dtype), _half(rng, (80, 48), dtype)
    out = _half(rng, (64, 48), dtype)
    ref = torch.addmm(_torch(out), _torch(a), _torch(b)).float().numpy()
    gemm.matmul_acc(a, b, out)
    assert _ulps(out, ref, dtype).max() <= 1


def test_mismatched_dtypes_raise(rng):
    with pytest.raises(TypeError):
        gemm.half_matmul(_half(rng, (4, 4), BF16), _half(rng, (4, 4), np.float16))


@pytest.mark.parametrize("sa,sb", [((40,), (3, 40, 30)), ((3, 40, 30), (30,)), ((40,), (40,)),
                                   ((500, 4, 16), (16, 16)), ((0, 40), (40, 30)),
                                   ((40, 0), (0, 30))])
def test_vectors_tiny_folded_and_empty(sa, sb, rng):
    a, b = _half(rng, sa, BF16), _half(rng, sb, BF16)
    out = gemm.matmul_nd(a, b)
    ref = (_torch(a) @ _torch(b)).float().numpy() if a.size and b.size else \
        np.matmul(a.astype(np.float32), b.astype(np.float32))
    assert out.dtype == BF16 and out.shape == ref.shape
    assert _ulps(out, ref, BF16).max(initial=0) <= 1


def test_mixed_dtypes_keep_numpys_promotion(rng):
    a, b = _half(rng, (64, 64), BF16), rng.standard_normal((64, 64)).astype(np.float32)
    out = gemm.matmul(a, b)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, a.astype(np.float32) @ b, rtol=1e-5, atol=1e-4)
