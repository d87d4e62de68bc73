"""int8 x int8 -> int32 products: bit-exact against an int64 reference on both paths."""

from __future__ import annotations

import os

import numpy as np
import pytest

from shapeflow.backend.cpu import igemm


def _reload(monkeypatch, **env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(igemm, "_state", {"loaded": False, "fn": None, "vnni": None,
                                          "refused": None})
    igemm._load()
    return igemm.backend()


PATHS = {"default": {}, "no-kernels": {"SHAPEFLOW_KERNELS": "0"},
         "numpy": {"SHAPEFLOW_BLAS": "numpy"}}


@pytest.fixture(params=list(PATHS))
def path(request, monkeypatch):
    """Each test on the path this machine picks (qgemm.c's VNNI kernel where it was built),
    without the compiled kernels (MKL where it loads), and on NumPy's."""
    got = _reload(monkeypatch, **PATHS[request.param])
    if request.param == "numpy":
        assert got == "numpy"
    if request.param == "no-kernels":
        assert got != "vnni"
    return got


def _ref(a, w):
    return a.astype(np.int64) @ w.astype(np.int64).T


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (64, 256, 96), (17, 1000, 33),
                                   (130, 64, 1), (40, 700, 130)])
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


def test_compiled_paths_are_used_where_they_load(monkeypatch):
    from importlib.util import find_spec

    from shapeflow.backend.cpu import gemm
    from shapeflow.backend.cpu.kernels import _cpu_flags

    flags = _cpu_flags() or set()
    allowed = os.environ.get("SHAPEFLOW_KERNELS", "") != "0"  # (the suite run with them off)
    if allowed and find_spec("shapeflow.backend.cpu._qgemm") and "avx512_vnni" in flags:
        assert _reload(monkeypatch) == "vnni", igemm._state["refused"]
    if gemm._find_mkl() is not None:
        assert _reload(monkeypatch, SHAPEFLOW_KERNELS="0") == "mkl"


def _linear_reference(x, w, sw, bias):
    """quant/modules.py's NumPy steps for the int8 scheme, with an int64 product."""
    s = (np.max(np.abs(x), axis=1) / np.float32(127)).astype(np.float32)
    s[s == 0] = 1
    xq = np.clip(np.rint(x / s[:, None]), -127, 127).astype(np.int64)
    y = (xq @ w.astype(np.int64).T).astype(np.float32)
    y *= s[:, None]
    y *= sw
    if bias is not None:
        y += bias
    return y


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 5, 3), (13, 37, 70), (64, 256, 129)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_fused_linear_is_bit_exact(monkeypatch, m, k, n, with_bias):
    if _reload(monkeypatch) != "vnni":
        assert igemm.linear_int8(np.ones((2, 2), np.float32), np.ones((2, 2), np.int8),
                                 np.ones(2, np.float32), None) is None
        pytest.skip("qgemm.c is not in use here")
    rng = np.random.default_rng(m + k + n)
    x = rng.standard_normal((m, k)).astype(np.float32) * 3
    x[0] = 0  # a zero row: scale 1
    x[-1, 0] = 1e6  # an outlier: the rest of the row rounds to 0
    w = rng.integers(-127, 128, (n, k), dtype=np.int8)
    sw = rng.random(n).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    np.testing.assert_array_equal(igemm.linear_int8(x, w, sw, bias),
                                  _linear_reference(x, w, sw, bias))


@pytest.mark.parametrize("m", [1, 5, 16, 17, 40])
def test_both_vnni_kernels_agree_with_the_reference(monkeypatch, m):
    """qgemm.c's unpacked kernel (few rows) and packed one (k blocked past 256)."""
    if _reload(monkeypatch) != "vnni":
        pytest.skip("qgemm.c is not in use here")
    rng = np.random.default_rng(m)
    a = rng.integers(-128, 128, (m, 777), dtype=np.int8)
    w = rng.integers(-128, 128, (70, 777), dtype=np.int8)
    for direct in (True, False):
        np.testing.assert_array_equal(igemm._vnni_matmul(a, w, direct), _ref(a, w))


@pytest.mark.parametrize("qdtype,kw", [("int8", {"axis": 0}), ("int4", {"group_size": 32}),
                                       ("int4", {"group_size": 128}), ("int4", {"group_size": 8}),
                                       ("int4", {"group_size": 7})])
def test_dequantize_weight_matches_numpy(monkeypatch, qdtype, kw):
    from shapeflow.quant import quantize_tensor

    if _reload(monkeypatch) != "vnni":
        pytest.skip("qgemm.c is not in use here")
    k = 7 * 37 if kw.get("group_size") == 7 else 256
    x = np.random.default_rng(0).standard_normal((33, k)).astype(np.float32)
    qt = quantize_tensor(x, qdtype, **kw)
    group = kw.get("group_size") or k
    bits = 4 if qdtype == "int4" else 8
    # per-group int4 scales are float16: widened to float32 before qgemm.c
    assert qt.scale.dtype == (np.float16 if qdtype == "int4" else np.float32)
    got = igemm.dequantize_weight(qt.qdata, bits, (33, k), group, qt.scale)
    np.testing.assert_array_equal(got, qt.dequantize_numpy())
    assert igemm.dequantize_weight(qt.qdata, bits, (33, k), 5, qt.scale) is None
