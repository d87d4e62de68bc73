"""2-D matrix products through Intel MKL's sgemm/dgemm when the `mkl` package is installed.

PyTorch's CPU build calls MKL; NumPy's wheels call OpenBLAS, whose sgemm is 10-25% slower
on the shapes of an MLP or a small transformer (measured in benchmarks/). With
`pip install shapeflow[mkl]`, 2-D float32/float64 products above a few thousand
multiply-adds go to MKL through ctypes; everything else, and every product when MKL is
absent or SHAPEFLOW_BLAS=numpy, stays `np.matmul`. Both give the same values up to
rounding order.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import numpy as np

from .kernels import address

# below this many multiply-adds the ctypes call (~1.5 us) costs more than MKL saves
MIN_MACS = 1 << 15
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_GEMM: dict = {}  # numpy dtype -> cblas_?gemm, filled by _load
_state = {"loaded": False}


def _find_mkl() -> Path | None:
    """libmkl_rt from the `mkl` wheel, which installs into <prefix>/lib."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        libs = sorted(Path(prefix, "lib").glob("libmkl_rt.so*"))
        if libs:
            return libs[-1]
    return None


def _load() -> None:
    _state["loaded"] = True
    if os.environ.get("SHAPEFLOW_BLAS", "").lower() == "numpy":
        return
    path = _find_mkl()
    if path is None:
        return
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:  # a broken install: NumPy's BLAS still works
        return
    ptr, i32 = ctypes.c_void_p, ctypes.c_int
    for name, scalar, dtype in (("cblas_sgemm", ctypes.c_float, np.float32),
                                ("cblas_dgemm", ctypes.c_double, np.float64)):
        fn = getattr(lib, name)
        fn.argtypes = [i32] * 6 + [scalar, ptr, i32, ptr, i32, scalar, ptr, i32]
        fn.restype = None
        _GEMM[np.dtype(dtype)] = fn


def backend() -> str:
    """'mkl' when 2-D float products go to MKL, else 'numpy'."""
    if not _state["loaded"]:
        _load()
    return "mkl" if _GEMM else "numpy"


def _operand(a: np.ndarray) -> tuple[int, int, np.ndarray] | None:
    """(transpose flag, leading dim, array) that describes a to cblas without a copy."""
    item = a.itemsize
    s0, s1 = a.strides
    rows, cols = a.shape
    if s1 == item and s0 % item == 0 and s0 // item >= max(cols, 1):
        return _NO_TRANS, s0 // item, a
    if s0 == item and s1 % item == 0 and s1 // item >= max(rows, 1):
        return _TRANS, s1 // item, a  # a is the transpose of a row-major [cols, rows]
    return None


def _numpy(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    out = np.matmul(a, b)
    if bias is not None:
        out += bias
    # ml_dtypes' bfloat16 matmul returns float32: round to the operands' dtype
    return out if out.dtype == a.dtype else out.astype(a.dtype)


def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """a @ b (+ bias, broadcast over rows): MKL for large 2-D float products, else np.matmul.

    With MKL the bias is written first and the product added to it (beta = 1), as
    PyTorch's addmm does: one pass over the output fewer than adding it afterwards.
    """
    if not _state["loaded"]:
        _load()
    dtype = a.dtype
    fn = _GEMM.get(dtype)
    if fn is None or a.ndim != 2 or b.ndim != 2 or b.dtype != dtype:
        return _numpy(a, b, bias)
    (m, k), n = a.shape, b.shape[1]
    if m * n * k < MIN_MACS or b.shape[0] != k or (bias is not None and bias.dtype != dtype):
        return _numpy(a, b, bias)
    oa, ob = _operand(a), _operand(b)
    if oa is None or ob is None:
        return _numpy(a, b, bias)
    out = np.empty((m, n), dtype)
    if bias is not None:
        np.copyto(out, bias)
    fn(_ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, address(a), oa[1], address(b), ob[1],
       0.0 if bias is None else 1.0, address(out), n)
    return out


def matmul_acc(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out += a @ b in place (MKL's beta = 1: no temporary), for 2-D float arrays.

    `out` may be a row block of a bigger array (rows strided, columns contiguous), as the
    recurrent ops' per-step gates are.
    """
    if not _state["loaded"]:
        _load()
    fn = _GEMM.get(a.dtype)
    if fn is not None and b.dtype == a.dtype and out.dtype == a.dtype and a.ndim == 2:
        (m, k), n = a.shape, b.shape[1]
        oa, ob, oo = _operand(a), _operand(b), _operand(out)
        if oa is not None and ob is not None and oo is not None and oo[0] == _NO_TRANS \
                and out.shape == (m, n) and b.shape[0] == k and m * n * k >= MIN_MACS:
            fn(_ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, address(a), oa[1], address(b), ob[1],
               1.0, address(out), oo[1])
            return
    out += a @ b
