"""QuantizedTensor and quantize_tensor against float64 references, int4 packing, fp8."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import shapeflow as sf
from shapeflow.errors import DTypeError, ShapeError
from shapeflow.quant import QuantError, pack_int4, quantize_tensor, unpack_int4

INT = {"int8": (-128, 127, np.int8), "uint8": (0, 255, np.uint8), "int4": (-8, 7, np.int8)}
FP8 = {"fp8-e4m3": (ml_dtypes.float8_e4m3fn, 448.0), "fp8-e5m2": (ml_dtypes.float8_e5m2, 57344.0)}
GRANULARITY = [{}, {"axis": 0}, {"axis": 1}, {"group_size": 8}]


def _data(seed=0, shape=(6, 24)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * rng.uniform(0.1, 5, (shape[0], 1))
    x[0, 3] = 7.5  # an outlier
    x[2] = np.abs(x[2])  # an all-positive row (asymmetric zero point away from the middle)
    return x.astype(np.float32)


def _slices(x64, axis, group):
    """The float64 values each scale covers, shaped like quantize_tensor's scale + [...]."""
    if group:
        return x64.reshape(*x64.shape[:-1], -1, group)
    if axis is not None:
        return np.moveaxis(x64, axis, 0).reshape(x64.shape[axis], -1)
    return x64.reshape(1, -1)


def _reference_int(x, qdtype, sym, axis, group):
    """float64 reference of the integer codes and the dequantized values."""
    qmin, qmax, _ = INT[qdtype]
    x64 = x.astype(np.float64)
    sl = _slices(x64, axis, group)
    # per-group int4 stores float16 scales (llama.cpp's Q4_0), the rest float32
    sdt = np.float16 if qdtype == "int4" and group else np.float32
    if sym:
        levels = 127 if qdtype in ("int8", "uint8") else 7
        scale = (np.abs(sl).max(axis=-1) / levels).astype(sdt).astype(np.float64)
        zp = np.full(scale.shape, 128.0 if qdtype == "uint8" else 0.0)
        lo, hi = (1, 255) if qdtype == "uint8" else (-levels, levels)
    else:
        mn, mx = np.minimum(sl.min(axis=-1), 0), np.maximum(sl.max(axis=-1), 0)
        scale = ((mx - mn) / (qmax - qmin)).astype(sdt).astype(np.float64)
        zp = np.clip(np.rint(qmin - mn / scale), qmin, qmax)
        lo, hi = qmin, qmax
    q = np.clip(np.rint(sl / scale[..., None]) + zp[..., None], lo, hi)
    deq = (q - zp[..., None]) * scale[..., None]
    if axis is not None and not group:
        shape = np.moveaxis(x64, axis, 0).shape
        q = np.moveaxis(q.reshape(shape), 0, axis)
        deq = np.moveaxis(deq.reshape(shape), 0, axis)
    return q.reshape(x.shape), deq.reshape(x.shape), scale, zp


@pytest.mark.parametrize("qdtype,sym,gran", list(itertools.product(INT, [True, False],
                                                                     GRANULARITY)))
def test_integer_dequantize_exact_vs_float64(qdtype, sym, gran):
    x = _data()
    qt = quantize_tensor(sf.tensor(x), qdtype, symmetric=sym, **gran)
    q, deq, scale, zp = _reference_int(x, qdtype, sym, gran.get("axis"), gran.get("group_size"))
    np.testing.assert_array_equal(qt.int_repr().astype(np.float64), q)
    np.testing.assert_array_equal(qt.scale.astype(np.float64).reshape(scale.shape), scale)
    group = gran.get("group_size")
    assert qt.scale.dtype == (np.float16 if qdtype == "int4" and group else np.float32)
    if sym and qdtype != "uint8":
        assert qt.zero_point is None
    else:
        np.testing.assert_array_equal(qt.zero_point.astype(np.float64).reshape(zp.shape), zp)
    out = qt.dequantize()
    assert out.dtype == sf.float32 and tuple(out.shape) == x.shape
    # exact: the float64 value rounded once to float32
    np.testing.assert_array_equal(out.numpy(), deq.astype(np.float32))
    assert np.abs(out.numpy() - x).max() <= np.max(scale) * (0.5 if sym else 1.0) + 1e-7 \
        or qdtype == "int4"


@pytest.mark.parametrize("qdtype", list(FP8))
@pytest.mark.parametrize("gran", GRANULARITY)
def test_fp8_matches_ml_dtypes(qdtype, gran):
    fp8, top = FP8[qdtype]
    x = _data(1)
    x64 = x.astype(np.float64)
    qt = quantize_tensor(x, qdtype, **gran)
    axis, group = gran.get("axis"), gran.get("group_size")
    sl = _slices(x64, axis, group)
    scale = (np.abs(sl).max(axis=-1) / top).astype(np.float32).astype(np.float64)
    q = (sl / scale[..., None]).astype(fp8)  # ml_dtypes' own rounding (to nearest even)
    deq = q.astype(np.float64) * scale[..., None]
    if axis is not None and not group:
        shape = np.moveaxis(x64, axis, 0).shape
        q = np.moveaxis(q.reshape(shape), 0, axis)
        deq = np.moveaxis(deq.reshape(shape), 0, axis)
    assert qt.qdata.dtype == fp8
    np.testing.assert_array_equal(qt.qdata.view(np.uint8), q.reshape(x.shape).view(np.uint8))
    np.testing.assert_array_equal(qt.dequantize().numpy(), deq.reshape(x.shape).astype(np.float32))
    assert qt.nbytes == x.size + 4 * qt.scale.size


def test_fp8_clamps_at_the_format_max_instead_of_nan():
    qt = quantize_tensor(np.array([1.0, -1000.0, 2.0], np.float32), "fp8-e4m3",
                         calibration_max=448.0)
    assert np.isfinite(qt.dequantize().numpy()).all()
    np.testing.assert_array_equal(qt.dequantize().numpy(), [1.0, -448.0, 2.0])


def test_round_half_to_even_and_clamp():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 300.0, -300.0], np.float32)
    qt = quantize_tensor(x, "int8", calibration_max=127.0)  # scale exactly 1
    assert float(qt.scale) == 1.0
    np.testing.assert_array_equal(qt.int_repr(), [0, 2, 2, 0, -2, 127, -127])
    qa = quantize_tensor(np.array([-300.0, 0.0, 300.0], np.float32), "uint8", symmetric=False,
                         calibration_max=127.5)
    np.testing.assert_array_equal(qa.int_repr(), [0, 128, 255])


@pytest.mark.parametrize("n", [1, 2, 7, 32, 33])
def test_int4_pack_round_trip(n):
    rng = np.random.default_rng(n)
    q = rng.integers(-8, 8, (3, n)).astype(np.int8)
    packed = pack_int4(q)
    assert packed.dtype == np.uint8 and packed.shape == (3, (n + 1) // 2)
    np.testing.assert_array_equal(unpack_int4(packed, n), q)
    # the layout: element 2i in the low nibble, 2i+1 in the high one
    assert packed[0, 0] & 0xF == q[0, 0] & 0xF
    if n > 1:
        assert packed[0, 0] >> 4 == q[0, 1] & 0xF


def test_int4_storage_is_half_a_byte_per_value():
    x = _data(2, (8, 64))
    qt = quantize_tensor(x, "int4", group_size=32)
    assert qt.qdata.dtype == np.uint8 and qt.qdata.shape == (8, 32)
    assert qt.scale.shape == (8, 2) and qt.scale.dtype == np.float16
    assert qt.nbytes == 8 * 32 + 8 * 2 * 2
    qa = quantize_tensor(x, "int4", group_size=32, symmetric=False)
    assert qa.nbytes == 8 * 32 + 8 * 2 * 2 + 8 * 2
    # per channel int4 keeps float32 scales
    assert quantize_tensor(x, "int4", axis=0).scale.dtype == np.float32


def test_int4_group_scales_out_of_float16_range_are_clamped():
    """A group whose max/7 underflows float16 (or falls in its subnormals) gets the smallest
    normal scale; one past float16's max gets the largest finite; the codes clamp at +-7."""
    f16 = np.finfo(np.float16)
    tiny, big = float(f16.smallest_normal), float(f16.max)
    x = np.zeros((4, 8), np.float64)
    x[0, :2] = [1e-12, -3e-13]  # scale 1.4e-13: rounds to 0 in float16
    x[1, :2] = [2e-6, 1e-6]  # a float16 subnormal scale
    x[2, :2] = [1e6, -3e5]  # scale 1.4e5: inf in float16
    x[3, :2] = [7.0, -3.5]  # scale 1, exact
    qt = quantize_tensor(x, "int4", group_size=8)
    assert qt.scale.dtype == np.float16 and np.isfinite(qt.scale).all()
    np.testing.assert_array_equal(qt.scale.astype(np.float64).ravel(), [tiny, tiny, big, 1.0])
    q = qt.int_repr()
    np.testing.assert_array_equal(q[:2], 0)  # both below half a step of the smallest normal
    np.testing.assert_array_equal(q[2, :2], [7, np.rint(-3e5 / big)])  # 1e6 / 65504 clamped
    np.testing.assert_array_equal(q[3, :2], [7, -4])  # -3.5 rounds half to even
    # dequantize stays q * float32(scale16), exactly
    want = q.astype(np.float64) * qt.scale.astype(np.float64)
    np.testing.assert_array_equal(qt.dequantize_numpy(), want.astype(np.float32))


def test_nbytes_is_exact():
    x = _data(3, (16, 48))
    assert quantize_tensor(x, "int8", axis=0).nbytes == 16 * 48 + 16 * 4
    assert quantize_tensor(x, "uint8", symmetric=False).nbytes == 16 * 48 + 4 + 1
    assert quantize_tensor(x, "int8").nbytes == 16 * 48 + 4


def test_rows_match_the_full_dequantization():
    x = _data(4, (10, 32))
    for kw in ({"axis": 0}, {"group_size": 8}, {}):
        qt = quantize_tensor(x, "int4", symmetric=False, **kw)
        idx = np.array([3, 0, 9, 3])
        np.testing.assert_array_equal(qt.rows(idx).dequantize_numpy(), qt.dequantize_numpy()[idx])


def test_zero_tensor_and_zero_rows():
    z = np.zeros((3, 8), np.float32)
    for qd in ("int8", "int4", "fp8-e4m3"):
        np.testing.assert_array_equal(quantize_tensor(z, qd, axis=0).dequantize().numpy(), z)


def test_errors_name_the_tensor_and_the_rule():
    x = _data()
    x[1, 2] = np.nan
    with pytest.raises(QuantError, match=r"fc1\.weight.*NaN/Inf.*\(1, 2\)"):
        quantize_tensor(x, "int8", name="fc1.weight")
    with pytest.raises(QuantError, match="NaN/Inf"):
        quantize_tensor(np.array([1.0, np.inf], np.float32))
    with pytest.raises(ShapeError, match=r"group_size 5 does not divide the last dim \(24\)"):
        quantize_tensor(_data(), "int4", group_size=5)
    with pytest.raises(DTypeError, match="unknown qdtype 'int3'.*") as e:
        quantize_tensor(_data(), "int3")
    assert "int8" in str(e.value)
    with pytest.raises(QuantError, match="symmetric only"):
        quantize_tensor(_data(), "fp8-e4m3", symmetric=False)
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        quantize_tensor(_data(), "int8", axis=2)
    assert isinstance(QuantError("x"), ValueError)
