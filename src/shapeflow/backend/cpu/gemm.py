"""2-D matrix products through Intel MKL's sgemm/dgemm when the `mkl` package is installed.

PyTorch's CPU build calls MKL; NumPy's wheels call OpenBLAS, whose sgemm is 10-25% slower
on the shapes of an MLP or a small transformer (measured in benchmarks/). With
`pip install shapeflow[mkl]`, 2-D float32/float64 products above a few thousand
multiply-adds go to MKL through ctypes; everything else, and every product when MKL is
absent or SHAPEFLOW_BLAS=numpy, stays `np.matmul`. Both give the same values up to
rounding order.

bfloat16 and float16 products (any rank) accumulate in float32 and round once to the
operands' dtype, as PyTorch's do: through MKL's gemm_bf16bf16f32 / gemm_f16f16f32 where MKL
is loaded, else through float32 copies and np.matmul. Never np.matmul on the 16-bit arrays
themselves: ml_dtypes' bfloat16 matmul runs at well under 1 GFLOP/s and returns float32.

This module holds the calls (ctypes into MKL, bf16gemm.c); which one runs for a product is
decided, and counted, by the cpu kernel table's matmul section (ladder.py). `matmul`,
`matmul_acc` and `matmul_nd` below are that table's kernels under their old names.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

from . import bf16gemm, kernels, threads
from .kernels import address

# below this many multiply-adds the ctypes call (~1.5 us) costs more than MKL saves
MIN_MACS = 1 << 15
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_GEMM: dict = {}  # numpy dtype -> cblas_?gemm, filled by _load
_F32 = np.dtype(np.float32)
_BF16, _F16 = np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)
# below this many rows MKL's bf16 gemm keeps up with bf16gemm.c (measured: 8x256x1024
# 34 vs 36 GFLOP/s, 128x256x128 117 vs 82, 1024^3 175 vs 98, one thread, Zen 4)
BF16GEMM_MIN_ROWS = 16
# A few rows times a wide weight (a vocabulary projection, a batch of decodes): MKL's kernel
# for 3-16 rows runs it well below memory speed, its one-row gemv below its two-row kernel
# (768x50257, one thread, Zen 4: 1/2/3/8 rows 11.4/8.3/21.8/27.7 ms). Column blocks of
# WIDE_BLOCK keep each block's packed operand in cache (3/8 rows: 11.7/20.3 ms), and one row
# runs as two (the second zeros). Three rows run as four on any big weight: MKL's
# three-row kernel is the slowest of 1-8 (GPT-2-small's layer weights: 3 rows 44 ms, 4 rows
# 37.5 ms).
WIDE_N, WIDE_BLOCK, WIDE_MAX_ROWS, PAD_MIN_WEIGHT = 8192, 2048, 16, 1 << 20
_PAD_ROWS = {1: 2, 3: 4}  # rows -> the rows MKL runs faster (wide b: both; else only 3)
_HALF_GEMM: dict = {_BF16: None, _F16: None}  # 16-bit dtype -> cblas_gemm_*f32 or None
_state = {"loaded": False}


def _find_mkl() -> Path | None:
    """libmkl_rt from the `mkl` wheel, which installs into <prefix>/lib."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        libs = sorted(Path(prefix, "lib").glob("libmkl_rt.so*"))
        if libs:
            return libs[-1]
    return None


def mkl_library() -> ctypes.CDLL | None:
    """libmkl_rt through ctypes, or None: absent, broken, or turned off (SHAPEFLOW_BLAS=numpy).

    The float, 16-bit, packed and int8 product paths each take their functions from it."""
    if os.environ.get("SHAPEFLOW_BLAS", "").lower() == "numpy":
        return None
    path = _find_mkl()
    if path is None:
        return None
    # MKL's OpenMP threads spin 200 ms after each product by default: on a loaded machine
    # they take the cores the main thread needs (the demo's epoch: 10-15 s under two busy
    # processes, 1-2 s with 0). Read when OpenMP starts, so set before the first MKL call.
    os.environ.setdefault("KMP_BLOCKTIME", "0")
    try:
        return ctypes.CDLL(str(path))
    except OSError:  # a broken install: NumPy's BLAS still works
        return None


def _load() -> None:
    _state["loaded"] = True
    lib = mkl_library()
    if lib is None:
        return
    ptr, i32 = ctypes.c_void_p, ctypes.c_int
    for name, scalar, dtype in (("cblas_sgemm", ctypes.c_float, np.float32),
                                ("cblas_dgemm", ctypes.c_double, np.float64)):
        fn = getattr(lib, name)
        fn.argtypes = [i32] * 6 + [scalar, ptr, i32, ptr, i32, scalar, ptr, i32]
        fn.restype = None
        _GEMM[np.dtype(dtype)] = fn
    for name, dtype in (("cblas_gemm_bf16bf16f32", _BF16), ("cblas_gemm_f16f16f32", _F16)):
        fn = getattr(lib, name, None)  # MKL 2020 and later
        if fn is not None:
            fn.argtypes = [i32] * 6 + [ctypes.c_float, ptr, i32, ptr, i32, ctypes.c_float,
                                       ptr, i32]
            fn.restype = None
            _HALF_GEMM[dtype] = fn


def backend() -> str:
    """'mkl' when 2-D float products go to MKL, else 'numpy'."""
    if not _state["loaded"]:
        _load()
    return "mkl" if _GEMM else "numpy"


def half_backend() -> str:
    """How bfloat16/float16 products run: MKL's 16-bit gemm, or float32 copies + np.matmul."""
    if not _state["loaded"]:
        _load()
    if bf16_kernel():
        return "bf16gemm.c (AVX512-BF16) for bf16, " + (
            "mkl gemm_f16f16f32 for fp16" if _HALF_GEMM[_F16] is not None else
            "fp16 through float32")
    if _HALF_GEMM[_BF16] is not None:
        return "mkl gemm_bf16bf16f32/f16f16f32 (float32 accumulate)"
    return "through float32 (np.matmul)"


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


def numpy_matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None,
                 out: np.ndarray | None = None) -> np.ndarray:
    """np.matmul(a, b) (+ bias), into `out` when given: the ladder's last rung."""
    out = np.matmul(a, b, out=out)
    if bias is not None:
        out += bias
    return out


def mkl_operands(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None):
    """(cblas gemm, a's and b's descriptions) where MKL takes this 2-D float product, else
    None: MKL absent, another dtype or rank, under MIN_MACS multiply-adds, or strides no
    cblas call takes without a copy."""
    if not _state["loaded"]:
        _load()
    dtype = a.dtype
    fn = _GEMM.get(dtype)
    if fn is None or a.ndim != 2 or b.ndim != 2 or b.dtype != dtype:
        return None
    (m, k), n = a.shape, b.shape[1]
    if m * n * k < MIN_MACS or b.shape[0] != k or (bias is not None and bias.dtype != dtype):
        return None
    oa, ob = _operand(a), _operand(b)
    if oa is None or ob is None:
        return None
    return fn, oa, ob


def is_few_rows(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a @ b is a few rows times a big weight, which runs faster padded and in
    column blocks (see WIDE_N)."""
    (m, k), n = a.shape, b.shape[1]
    return m <= WIDE_MAX_ROWS and k * n >= PAD_MIN_WEIGHT and (n >= WIDE_N or m == 3)


def mkl_matmul(fn, a: np.ndarray, oa: tuple, b: np.ndarray, ob: tuple,
               bias: np.ndarray | None, out: np.ndarray | None = None) -> np.ndarray:
    """a @ b (+ bias) by one cblas gemm call into `out` (C-contiguous [m, n]) or a new array.

    With a bias it is written first and the product added to it (beta = 1), as PyTorch's
    addmm does: one pass over the output fewer than adding it afterwards.
    """
    (m, k), n = a.shape, b.shape[1]
    if out is None:
        out = np.empty((m, n), a.dtype)
    if bias is not None:
        np.copyto(out, bias)
    threads.for_product(m * n * k)
    fn(_ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, address(a), oa[1], address(b), ob[1],
       0.0 if bias is None else 1.0, address(out), n)
    return out


def few_rows(fn, a: np.ndarray, oa: tuple, ob: tuple, b: np.ndarray,
             bias: np.ndarray | None) -> np.ndarray:
    """a @ b (+ bias) for a few rows of a and a big b: padded rows, and column blocks when
    b is wide (see WIDE_N)."""
    (m, k), n = a.shape, b.shape[1]
    rows = m
    wide = n >= WIDE_N
    if m in _PAD_ROWS and (wide or m == 3):  # zero rows: the faster kernel, then dropped
        pad = np.zeros((_PAD_ROWS[m], k), a.dtype)
        pad[:m] = a
        a, oa, m = pad, (_NO_TRANS, k, pad), pad.shape[0]
    out = np.empty((m, n), a.dtype)
    if bias is not None:
        np.copyto(out, bias)
    beta = 0.0 if bias is None else 1.0
    item, pa, pb, po = a.itemsize, address(a), address(b), address(out)
    # column j of op(b) starts j elements in (row-major b) or j rows in (transposed b)
    col = item if ob[0] == _NO_TRANS else ob[1] * item
    block = WIDE_BLOCK if wide else n
    threads.for_product(m * block * k)
    for j in range(0, n, block):
        w = min(block, n - j)
        fn(_ROW_MAJOR, oa[0], ob[0], m, w, k, 1.0, pa, oa[1], pb + j * col, ob[1], beta,
           po + j * item, n)
    return out[:rows] if rows != m else out


def mkl_accumulate(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> bool:
    """out += a @ b by MKL's gemm with beta = 1 (no temporary), for 2-D float arrays; False
    where MKL does not take it. `out` may be a row block of a bigger array (rows strided,
    columns contiguous), as the recurrent ops' per-step gates are."""
    if not _state["loaded"]:
        _load()
    fn = _GEMM.get(a.dtype)
    if fn is None or b.dtype != a.dtype or out.dtype != a.dtype or a.ndim != 2:
        return False
    (m, k), n = a.shape, b.shape[1]
    oa, ob, oo = _operand(a), _operand(b), _operand(out)
    if oa is None or ob is None or oo is None or oo[0] != _NO_TRANS \
            or out.shape != (m, n) or b.shape[0] != k or m * n * k < MIN_MACS:
        return False
    threads.for_product(m * n * k)
    fn(_ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, address(a), oa[1], address(b), ob[1],
       1.0, address(out), oo[1])
    return True


def half_accumulate(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> str:
    """out += a @ b for 16-bit operands: a float32 sum and one rounding, as PyTorch's
    addmm_; returns the path that ran the product."""
    acc, path = _half_f32_path(a, b, None)
    out[...] = kernels.narrow(out.astype(_F32) + acc, out.dtype)
    return path


# The public functions of this module, for the callers that have not moved to their
# device's kernel table: each is one kernel of the cpu table (ladder.py), which decides
# the rung and counts it.
def matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """a @ b (+ bias, broadcast over rows): the table's matmul_bias kernel."""
    from .ladder import table  # here: ladder.py imports this module for its MKL calls

    return table.matmul_bias(a, b, bias)


def matmul_acc(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out += a @ b in place: the table's matmul_accumulate kernel."""
    from .ladder import table

    table.matmul_accumulate(a, b, out)


def matmul_nd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul (any rank, batch dims broadcast), 16-bit operands through half_matmul: the
    table's bmm kernel."""
    from .ladder import table

    return table.bmm(a, b)


def half_matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """a @ b (+ bias) for bfloat16/float16 operands of any rank >= 1 (batch dims broadcast):
    float32 accumulate, the bias added in float32, one rounding to the operands' dtype."""
    return half_product(a, b, bias)[0]


def half_product(a: np.ndarray, b: np.ndarray,
                 bias: np.ndarray | None = None) -> tuple[np.ndarray, str]:
    """(half_matmul's result, the path that ran: 'compiled', 'mkl' or 'numpy')."""
    dtype = a.dtype
    if b.dtype != dtype or (bias is not None and bias.dtype != dtype):
        raise TypeError(f"half_matmul: operands must share one 16-bit dtype, got {a.dtype}, "
                        f"{b.dtype}" + ("" if bias is None else f" and {bias.dtype}"))
    if dtype == _BF16 and a.ndim >= 2 and b.ndim >= 2:
        out = _bf16_direct(a, b, bias)
        if out is not None:
            return out, "compiled"
    acc, path = _half_f32_path(a, b, bias)
    return kernels.narrow(acc, dtype), path


def bf16_kernel() -> bool:
    """Whether bfloat16 products run on bf16gemm.c: where it is loaded, unless the CPU has
    AMX tiles and MKL's gemm_bf16bf16f32 can use them (several times the kernel's speed)."""
    if not _state["loaded"]:
        _load()
    if "amx" not in _state:  # the CPU's flags do not change
        _state["amx"] = {"amx_tile", "amx_bf16"} <= (kernels._cpu_flags() or set())
    return bf16gemm.available() and not (_state["amx"] and _HALF_GEMM[_BF16] is not None)


def _bf16_direct(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray | None:
    """a @ b (+ bias) rounded straight into bfloat16 by bf16gemm.c, no float32 result in
    between; None where that kernel is off, or where MKL or NumPy take the product."""
    if not _state["loaded"]:
        _load()
    k, n = b.shape[-2], b.shape[-1]
    rows = a.size // max(a.shape[-1], 1) if b.ndim == 2 else a.shape[-2]
    if not bf16_kernel() or rows * k * n < MIN_MACS or a.shape[-1] != k or (
            rows < BF16GEMM_MIN_ROWS and _HALF_GEMM[_BF16] is not None):
        return None
    bias32 = None if bias is None else np.ascontiguousarray(kernels.widen(bias))
    if b.ndim == 2:  # [..., m, k] @ [k, n]: one product over all rows of a
        out = np.empty(a.shape[:-1] + (n,), _BF16)
        if bf16gemm.matmul_bf16(a.reshape(-1, k), b, bias32, out.reshape(-1, n)) is None:
            return None
        return out
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-2], n), _BF16)
    for i in np.ndindex(*batch):
        if bf16gemm.matmul_bf16(a[i], b[i], bias32, out[i]) is None:
            return None
    return out


def _half_f32(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """The float32 result of a @ b (+ bias) for 16-bit operands, before rounding."""
    return _half_f32_path(a, b, bias)[0]


def _half_f32_path(a: np.ndarray, b: np.ndarray,
                   bias: np.ndarray | None) -> tuple[np.ndarray, str]:
    """(_half_f32's result, the path that ran: 'compiled', 'mkl' or 'numpy')."""
    if not _state["loaded"]:
        _load()
    fn = _HALF_GEMM[a.dtype]
    if a.dtype == _BF16 and bf16_kernel():  # AVX512-BF16 kernel: ~2x MKL's on Zen 4
        fn = bf16gemm.gemm_into
    bias32 = None if bias is None else kernels.widen(bias)
    if a.ndim < 2 or b.ndim < 2 or fn is None or (
            a.shape[-2] if b.ndim != 2 else a.size // max(a.shape[-1], 1)  # b 2-D: folded
            ) * a.shape[-1] * b.shape[-1] < MIN_MACS:
        return np.asarray(numpy_matmul(kernels.widen(a), kernels.widen(b), bias32)), "numpy"
    if b.ndim == 2:  # [..., m, k] @ [k, n]: one gemm over all rows of a
        lead = a.shape[:-1]
        out = np.empty(lead + (b.shape[1],), _F32)
        path = _half_gemm(fn, a.reshape(-1, a.shape[-1]), b, bias32,
                          out.reshape(-1, b.shape[1]))
        return out, path
    # batched: one gemm per matrix of the broadcast batch (MKL has no strided batch call
    # for the 16-bit types), each writing its block of one float32 result
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-2], b.shape[-1]), _F32)
    path = "numpy"  # an empty batch runs no product
    for i in np.ndindex(*batch):
        path = _half_gemm(fn, a[i], b[i], bias32, out[i])
    return out, path


def _half_gemm(fn, a: np.ndarray, b: np.ndarray, bias32: np.ndarray | None,
               out: np.ndarray) -> str:
    """out (float32, C-contiguous) = a @ b (+ bias32) through bf16gemm.c ('compiled') or
    MKL's 16-bit gemm ('mkl'); returns which."""
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k:
        raise ValueError(f"matmul: contraction mismatch {a.shape} @ {b.shape}")
    oa, ob = _operand(a), _operand(b)
    if oa is None:  # strides no cblas call takes: a packed copy (half the bytes of float32)
        a = np.ascontiguousarray(a)
        oa = _operand(a)
    if ob is None:
        b = np.ascontiguousarray(b)
        ob = _operand(b)
    if fn is bf16gemm.gemm_into and m < BF16GEMM_MIN_ROWS and _HALF_GEMM[_BF16] is not None:
        fn = _HALF_GEMM[_BF16]
    if fn is bf16gemm.gemm_into:  # any strides: it packs both operands itself
        out[...] = 0.0 if bias32 is None else bias32
        fn(a, b, out)
        return "compiled"
    if bias32 is not None:
        np.copyto(out, bias32)
    threads.for_product(m * n * k)
    fn(_ROW_MAJOR, oa[0], ob[0], m, n, k, 1.0, address(a), oa[1], address(b), ob[1],
       0.0 if bias32 is None else 1.0, address(out), n)
    return "mkl"

