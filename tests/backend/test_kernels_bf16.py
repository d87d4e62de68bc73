"""The bfloat16 section of backend/cpu/kernels.c: conversions bit for bit with ml_dtypes (both the
AVX512-BF16 path and the portable one), and the bf16 forms of GELU, softmax, log_softmax
and layer norm equal to the float32 kernels on the widened input, rounded once."""

import ml_dtypes
import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.backend.cpu import kernels
from shapeflow.backend.cpu.ladder import table as cpu_table
from shapeflow.backend.reference.elementwise import OFFSET, STEPS

BF16 = np.dtype(ml_dtypes.bfloat16)
pytestmark = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not built")


@pytest.fixture(params=[True, False], ids=["simd", "portable"])
def simd(request):
    """Each test once with AVX512-BF16 rounding (where the CPU has it) and once without."""
    old = kernels.bf16_simd()
    on = kernels.bf16_simd(request.param)
    if request.param and not on:
        pytest.skip("this CPU has no AVX512-BF16")
    yield on
    kernels.bf16_simd(old)


def _bits(a):
    return a.view(np.uint16)


def _special_floats(rng, n):
    """Random float32 bit patterns (NaNs with payloads, subnormals, infs included), values
    on rounding ties, and plain normals."""
    raw = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    ties = (rng.integers(0, 2**16, n, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000
    tiny = rng.integers(0, 0x00800000, n, dtype=np.uint64).astype(np.uint32)  # subnormals
    edges = np.array([0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345,
                      0x7f7fffff, 0x7f7f8000, 0x00000001, 0x807fffff, 0, 0x80000000],
                     np.uint32)
    normals = rng.standard_normal(n).astype(np.float32).view(np.uint32)
    return np.concatenate([raw, ties, tiny, edges, normals]).view(np.float32)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000])
def test_narrowing_matches_ml_dtypes_bit_for_bit(simd, n, rng):
    x = _special_floats(rng, 4000)
    x = np.concatenate([x, x[:n]])  # a length that is not a whole number of vectors
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(BF16)
    got = kernels.f32_to_bf16(x)
    assert got.dtype == BF16
    np.testing.assert_array_equal(_bits(got), _bits(ref))


def test_narrowing_nan_and_subnormals_in_a_whole_vector(simd):
    # a 16-lane block holding a NaN or a subnormal takes the exact path as a whole
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    x[5], x[21], x[40] = np.nan, 1e-40, -np.float32(np.nan)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(_bits(kernels.f32_to_bf16(x)), _bits(x.astype(BF16)))


def test_widening_every_bf16_exactly():
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(BF16)
    got = kernels.bf16_to_f32(every)
    np.testing.assert_array_equal(got.view(np.uint32), every.view(np.uint16).astype(np.uint32)
                                  << 16)


def test_wrappers_refuse_other_arrays():
    x = np.ones((4, 6), np.float32)
    assert kernels.f32_to_bf16(x[:, ::2]) is None  # not contiguous
    assert kernels.f32_to_bf16(x.astype(np.float64)) is None
    assert kernels.bf16_to_f32(x) is None
    # narrow/widen always answer: the kernel where it applies, NumPy's cast elsewhere
    np.testing.assert_array_equal(kernels.narrow(x[:, ::2], BF16), x[:, ::2].astype(BF16))
    np.testing.assert_array_equal(kernels.widen(x.astype(np.float16)), x)


def test_cast_op_uses_the_kernel_and_matches_torch(rng):
    x32 = _special_floats(rng, 500)
    x32 = x32[np.isfinite(x32)]
    t = sf.from_numpy(x32)
    h = t.to(sf.bfloat16)
    np.testing.assert_array_equal(_bits(h._data),
                                  torch.from_numpy(x32).bfloat16().view(torch.int16).numpy()
                                  .view(np.uint16))
    np.testing.assert_array_equal(h.float().numpy(), h._data.astype(np.float32))


def _bf16(rng, shape, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(BF16)


@pytest.mark.parametrize("times", [False, True])
def test_gelu_table_in_bf16_is_the_float32_kernel_rounded(simd, times, rng):
    x = _bf16(rng, 5000)
    t = _bf16(rng, 5000) if times else None
    table = cpu_table.gelu_pairs("phi")
    args = (float(STEPS), float(OFFSET))
    got = kernels.interp_times_bf16(x, t, table, *args)
    ref = kernels.interp_times(x.astype(np.float32), None if t is None else
                               t.astype(np.float32), table, *args).astype(BF16)
    np.testing.assert_array_equal(_bits(got), _bits(ref))


def test_gelu_op_in_bf16_same_with_and_without_kernels(rng):
    x = sf.from_numpy(_bf16(rng, (37, 129)))
    fast = F.gelu(x)
    old = kernels.set_enabled(False)
    try:
        slow = F.gelu(x)
    finally:
        kernels.set_enabled(old)
    assert fast.dtype is sf.bfloat16 and fast._data.dtype == BF16
    np.testing.assert_array_equal(_bits(fast._data), _bits(slow._data))


@pytest.mark.parametrize("n", [1, 7, 16, 300])
def test_softmax_rows_bf16_is_the_float32_kernel_rounded(simd, n, rng):
    x = _bf16(rng, (33, n))
    got = kernels.softmax_rows_bf16(x, log=False)
    ref = x.astype(np.float32)
    assert kernels.softmax_rows(ref, 1.0, 0, False)
    np.testing.assert_array_equal(_bits(got), _bits(ref.astype(BF16)))


def test_log_softmax_rows_bf16_close_to_float32(rng):
    x = _bf16(rng, (40, 257))
    got = kernels.softmax_rows_bf16(x, log=True).astype(np.float64)
    x64 = x.astype(np.float64)
    ref = x64 - x64.max(1, keepdims=True)
    ref -= np.log(np.exp(ref).sum(1, keepdims=True))
    assert (np.abs(got - ref) <= np.abs(ref) * 2.0**-8 + 1e-6).all()


def test_log_softmax_rows_with_inf_or_nan_go_to_numpy():
    x = np.zeros((3, 8), BF16)
    x[1, 2] = np.inf
    assert kernels.softmax_rows_bf16(x, log=True) is None
    x[1, 2] = np.nan
    assert kernels.softmax_rows_bf16(x, log=True) is None
    x[1, 2] = -np.inf  # a finite max: fine, that entry's log-probability is -inf
    out = kernels.softmax_rows_bf16(x, log=True)
    assert out is not None and out[1, 2] == -np.inf


@pytest.mark.parametrize("sdt_log", [False, True])
def test_softmax_ops_in_bf16_against_torch_with_special_rows(sdt_log):
    rows = np.array([[1.0, 2.0, 3.0, -np.inf], [-np.inf] * 4, [0.0, np.nan, 1.0, 2.0],
                     [np.inf, 0.0, 1.0, 2.0], [100.0, -100.0, 0.5, 0.25]], np.float32)
    x, t = sf.from_numpy(rows).to(sf.bfloat16), torch.from_numpy(rows).bfloat16()
    got = (x.log_softmax(1) if sdt_log else x.softmax(1)).float().numpy()
    ref = (t.log_softmax(1) if sdt_log else t.softmax(1)).float().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=2**-7, atol=0)


@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_bf16_is_the_float32_kernel_rounded(simd, rms, affine, rng):
    x = _bf16(rng, (19, 300))
    w = rng.standard_normal(300).astype(np.float32) if affine else None
    b = rng.standard_normal(300).astype(np.float32) if affine and not rms else None
    out, mean, rstd = kernels.layer_norm_bf16(x, w, b, 1e-5, rms)
    ref, rmean, rrstd = kernels.layer_norm(x.astype(np.float32), w, b, 1e-5, rms)
    np.testing.assert_array_equal(_bits(out), _bits(ref.astype(BF16)))
    np.testing.assert_array_equal(rstd, rrstd)
    assert (mean is None) == rms and (rms or np.array_equal(mean, rmean))


def test_layer_norm_module_in_bf16_matches_torch(rng):
    x = _bf16(rng, (8, 16, 96), scale=1.0)
    layer = sf.nn.LayerNorm(96).to(sf.bfloat16)
    ref = torch.nn.LayerNorm(96).to(torch.bfloat16)
    got = layer(sf.from_numpy(x)).float().detach().numpy()
    want = ref(torch.from_numpy(x.astype(np.float32)).bfloat16()).float().detach().numpy()
    assert np.abs(got - want).max() <= 2**-7 * np.abs(want).max()
    assert (got != want).mean() < 0.01


@pytest.mark.parametrize("rows, n", [(1, 1), (7, 33), (1024, 300)])
def test_col_sums_bf16_accumulates_in_float32(rows, n):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, n)).astype(ml_dtypes.bfloat16)
    got = kernels.col_sums_bf16(x)
    want = x.astype(np.float64).sum(0)
    bound = rows * 2.0 ** -24 * np.abs(x.astype(np.float64)).sum(0)  # float32 adds in order
    assert got.dtype == np.float32 and (np.abs(got - want) <= bound).all()
    if n > 1:  # strided: the caller's NumPy path
        assert kernels.col_sums_bf16(x[:, ::2]) is None


def test_bf16_linear_bias_grad_matches_torch():
    rng = np.random.default_rng(1)
    x, g = (rng.standard_normal((2, 300, 64)).astype(np.float32) for _ in range(2))
    w, b = rng.standard_normal((64, 64)).astype(np.float32), np.zeros(64, np.float32)
    args = [sf.tensor(a).to(sf.bfloat16).requires_grad_() for a in (x, w, b)]
    F.linear(*args).backward(sf.tensor(g).to(sf.bfloat16))
    targs = [torch.tensor(a).bfloat16().requires_grad_() for a in (x, w, b)]
    torch.nn.functional.linear(*targs).backward(torch.tensor(g).bfloat16())
    got, want = args[2].grad.float().numpy(), targs[2].grad.float().numpy()
    assert (np.abs(got - want) <= np.abs(want) * 2.0 ** -8 + 1e-6).all()  # one rounding apart
