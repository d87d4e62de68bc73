"""int8 x int8 -> int32 matrix products, exact: MKL's cblas_gemm_s8u8s32, else NumPy.

MKL multiplies an unsigned by a signed 8-bit matrix (VNNI's vpdpbusd does u8 x s8), so the
signed activations are shifted by +128 (a flip of the top bit) and the product corrected
by 128 * (row sums of the weight), as fbgemm and oneDNN do: (a + 128) w - 128 sum(w) = a w,
exact in int32. A self-check at load compares MKL with the integer reference on the
extreme values (255 x -128, where a kernel that sums pairs in int16 would saturate) and
falls back to NumPy if they differ. SHAPEFLOW_BLAS=numpy or no MKL: the NumPy path, a
float64 product, exact because every partial sum is an integer below 2^53.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from .gemm import _find_mkl
from .kernels import address

_ROW_MAJOR, _NO_TRANS, _TRANS, _FIX_OFFSET = 101, 111, 112, 173
# float64 sums of int8 products stay exact while k * 128 * 128 < 2^53
_EXACT_F64_K = (1 << 53) // (128 * 128)
_state: dict = {"loaded": False, "fn": None}


def _load() -> None:
    _state["loaded"] = True
    _state["fn"] = None
    if os.environ.get("SHAPEFLOW_BLAS", "").lower() == "numpy":
        return
    path = _find_mkl()
    if path is None:
        return
    try:
        lib = ctypes.CDLL(str(path))
        fn = lib.cblas_gemm_s8u8s32
    except (OSError, AttributeError):  # a broken or old MKL: NumPy still works
        return
    i32, ptr, f32, i8 = ctypes.c_int, ctypes.c_void_p, ctypes.c_float, ctypes.c_int8
    fn.argtypes = [i32] * 7 + [f32, ptr, i32, i8, ptr, i32, i8, f32, ptr, i32, ptr]
    fn.restype = None
    _state["fn"] = fn
    if not _self_check():
        _state["fn"] = None


def _self_check() -> bool:
    """MKL against the integer reference on extreme and random values."""
    rng = np.random.default_rng(0)
    a = np.concatenate([np.full((2, 96), -128, np.int8), np.full((1, 96), 127, np.int8),
                        rng.integers(-128, 128, (5, 96), dtype=np.int8)])
    w = np.concatenate([np.full((2, 96), -128, np.int8), np.full((1, 96), 127, np.int8),
                        rng.integers(-128, 128, (6, 96), dtype=np.int8)])
    want = a.astype(np.int64) @ w.astype(np.int64).T
    return bool(np.array_equal(_mkl(a, w, None), want))


def backend() -> str:
    """'mkl' when int8 products go to MKL's s8u8s32, else 'numpy'."""
    if not _state["loaded"]:
        _load()
    return "mkl" if _state["fn"] is not None else "numpy"


def weight_correction(w: np.ndarray) -> np.ndarray:
    """-128 * row sums of an int8 weight [N, K]: what the +128 shift adds, as int32 [N]."""
    return (w.sum(axis=1, dtype=np.int64) * -128).astype(np.int32)


def _mkl(a: np.ndarray, w: np.ndarray, correction: np.ndarray | None) -> np.ndarray:
    (m, k), n = a.shape, w.shape[0]
    shifted = np.bitwise_xor(a.view(np.uint8), np.uint8(0x80))  # a + 128, as uint8
    w = np.ascontiguousarray(w)
    out = np.empty((m, n), np.int32)
    zero = np.zeros(1, np.int32)
    _state["fn"](_ROW_MAJOR, _NO_TRANS, _TRANS, _FIX_OFFSET, m, n, k, 1.0, address(shifted),
                 k, 0, address(w), k, 0, 0.0, address(out), n, address(zero))
    out += weight_correction(w) if correction is None else correction
    return out


def _numpy(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    if a.shape[1] <= _EXACT_F64_K:
        return np.matmul(a.astype(np.float64), w.astype(np.float64).T).astype(np.int32)
    return np.matmul(a.astype(np.int64), w.astype(np.int64).T).astype(np.int32)


def int8_matmul(a: np.ndarray, w: np.ndarray, correction: np.ndarray | None = None
                ) -> np.ndarray:
    """a [M, K] int8 @ w [N, K]^T int8 -> [M, N] int32, exact (a Linear's layout).

    `correction` is weight_correction(w), precomputed where w is reused.
    """
    if a.dtype != np.int8 or w.dtype != np.int8 or a.ndim != 2 or w.ndim != 2 \
            or a.shape[1] != w.shape[1]:
        raise ValueError(f"int8_matmul: expected int8 [M, K] and [N, K], got {a.dtype} "
                         f"{list(a.shape)} and {w.dtype} {list(w.shape)}")
    if not _state["loaded"]:
        _load()
    m, k = a.shape
    if _state["fn"] is None or m == 0 or k == 0 or w.shape[0] == 0:
        return _numpy(a, w)
    return _mkl(np.ascontiguousarray(a), w, correction)
