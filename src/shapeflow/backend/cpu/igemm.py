"""int8 x int8 -> int32 matrix products, exact: a VNNI kernel, MKL's s8u8s32, or NumPy.

Three paths, the first that loads: qgemm.c (AVX512-VNNI, built with the package for the CPU
that compiles it; it also quantizes the activations and applies the scales, fused), MKL's
cblas_gemm_s8u8s32, NumPy. On the AMD EPYC (AVX512-VNNI) this was written on, MKL's
s8u8s32 ran at half the speed of its own sgemm (44 vs 95 GFLOP/s at 1024^3, one thread),
so qgemm.c comes first. SHAPEFLOW_KERNELS=0 skips it; SHAPEFLOW_BLAS=numpy skips both.

Both compiled paths multiply an unsigned by a signed 8-bit matrix (vpdpbusd does u8 x s8),
so the signed activations are shifted by +128 (a flip of the top bit) and the product is
corrected by 128 * (row sums of the weight), as fbgemm and oneDNN do:
(a + 128) w - 128 sum(w) = a w, exact in int32. A self-check at load compares each compiled
path with the integer reference on extreme values (255 x -128, where a kernel that sums
pairs in int16 would saturate) and drops it if they differ. The NumPy path is a float64
product, exact because every partial sum is an integer below 2^53.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from . import threads
from .gemm import mkl_library
from .kernels import _cpu_flags, address

_ROW_MAJOR, _NO_TRANS, _TRANS, _FIX_OFFSET = 101, 111, 112, 173
# float64 sums of int8 products stay exact while k * 128 * 128 < 2^53
_EXACT_F64_K = (1 << 53) // (128 * 128)
_state: dict = {"loaded": False, "fn": None, "vnni": None, "refused": None}
_P, _N = ctypes.c_void_p, ctypes.c_ssize_t
_QGEMM_SIGNATURES = {
    "qgemm_quantize_rows": [_P, _N, _N, _N, _N, _P, _P],
    "qgemm_pack": [_P, _N, _N, _N, _P, _P],
    "qgemm_u8s8": [_P, _N, _N, _P, _N, _P, _P, _P, _P, _P, _P],
    "qgemm_u8s8_direct": [_P, _N, _N, _P, _N, _N, _P, _P, _P, _P, _P],
    "qgemm_dequantize": [_P, ctypes.c_int, _N, _N, _N, _P, _P],
}
# up to this many rows the unpacked kernel wins: packing the weight costs a pass over it
DIRECT_ROWS = 16
_QGEMM_FILE = os.path.join(os.path.dirname(__file__), "qgemm.c")


def _load_vnni():
    """qgemm.c's library where it was built from this qgemm.c, with VNNI, for this CPU."""
    from importlib.util import find_spec

    if os.environ.get("SHAPEFLOW_KERNELS", "") == "0" or \
            os.environ.get("SHAPEFLOW_BLAS", "").lower() == "numpy":
        return None
    spec = find_spec("shapeflow.backend.cpu._qgemm")  # plain C: found, not imported
    if spec is None or not spec.origin:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
        vnni = ctypes.c_int.in_dll(lib, "qgemm_vnni").value
        built = ctypes.string_at(ctypes.addressof(
            ctypes.c_char.in_dll(lib, "shapeflow_qgemm_source"))).decode()
        tile = tuple(ctypes.c_int.in_dll(lib, f"qgemm_{t}").value for t in ("mr", "nr"))
    except (OSError, ValueError, AttributeError):
        return None
    if not vnni:
        return None
    from .native import source_digest  # setup.py's rule: the source, then isa.h

    digest = source_digest(_QGEMM_FILE)
    if digest is not None and built != digest:
        _state["refused"] = "built from another qgemm.c: rebuild (python setup.py build_ext " \
                            "--inplace)"
        return None
    flags = _cpu_flags()
    if flags is not None and not {"avx512f", "avx512bw", "avx512_vnni"} <= flags:
        _state["refused"] = "built for AVX512-VNNI, which this CPU lacks"
        return None
    for name, args in _QGEMM_SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, None
    _state["tile"] = tile
    return lib


def _load() -> None:
    _state["loaded"] = True
    _state["fn"] = None
    _state["vnni"] = _load_vnni()
    if _state["vnni"] is not None and not _self_check(_vnni_matmul):
        _state["vnni"], _state["refused"] = None, "qgemm.c failed its self-check"
    fn = getattr(mkl_library(), "cblas_gemm_s8u8s32", None)  # None: no MKL, or an old one
    if fn is None:
        return
    i32, ptr, f32, i8 = ctypes.c_int, ctypes.c_void_p, ctypes.c_float, ctypes.c_int8
    fn.argtypes = [i32] * 7 + [f32, ptr, i32, i8, ptr, i32, i8, f32, ptr, i32, ptr]
    fn.restype = None
    _state["fn"] = fn
    if not _self_check(lambda a, w: _mkl(a, w, None)):
        _state["fn"] = None


def _vnni_matmul(a: np.ndarray, w: np.ndarray, direct: bool | None = None) -> np.ndarray:
    """a . w^T through qgemm.c: a + 128 as uint8, padded with 128 (times w's zero padding)."""
    shifted = np.full((_round_up(len(a), _state["tile"][0]), _round_up(a.shape[1], 4)), 128,
                      np.uint8)
    np.bitwise_xor(a.view(np.uint8), np.uint8(0x80), out=shifted[:len(a), :a.shape[1]])
    return _vnni(shifted, len(a), w, out_float=False, direct=direct)


def _self_check(product) -> bool:
    """A compiled product against the integer reference on extreme and random values."""
    rng = np.random.default_rng(0)
    a = np.concatenate([np.full((2, 96), -128, np.int8), np.full((1, 96), 127, np.int8),
                        rng.integers(-128, 128, (5, 96), dtype=np.int8)])
    w = np.concatenate([np.full((2, 96), -128, np.int8), np.full((1, 96), 127, np.int8),
                        rng.integers(-128, 128, (6, 96), dtype=np.int8)])
    want = a.astype(np.int64) @ w.astype(np.int64).T
    if product is _vnni_matmul:  # both of qgemm.c's kernels
        return all(np.array_equal(_vnni_matmul(a, w, d), want) for d in (False, True))
    return bool(np.array_equal(product(a, w), want))


def backend() -> str:
    """Where int8 products go: 'vnni' (qgemm.c), 'mkl' (s8u8s32) or 'numpy'."""
    if not _state["loaded"]:
        _load()
    return "vnni" if _state["vnni"] is not None else "mkl" if _state["fn"] is not None \
        else "numpy"


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _vnni(a_u8: np.ndarray, m: int, w: np.ndarray, scales=None, out_float=True,
          direct: bool | None = None):
    """qgemm.c on padded shifted activations [mp, kp]: the int32 or scaled float out."""
    lib = _state["vnni"]
    n, k = w.shape
    kp = a_u8.shape[1]
    w = np.ascontiguousarray(w)
    out = np.empty((m, n), np.float32 if out_float else np.int32)
    row_scale, col_scale, bias = scales if out_float else (None, None, None)
    ptrs = (None if row_scale is None else address(row_scale),
            None if col_scale is None else address(col_scale),
            None if bias is None else address(bias),
            address(out) if out_float else None, None if out_float else address(out))
    if direct if direct is not None else m <= DIRECT_ROWS:
        lib.qgemm_u8s8_direct(address(a_u8), m, kp, address(w), n, k, *ptrs)
        return out
    packed = np.empty(_round_up(n, _state["tile"][1]) * kp, np.int8)
    corr = np.empty(n, np.int32)
    lib.qgemm_pack(address(w), n, k, kp, address(packed), address(corr))
    lib.qgemm_u8s8(address(a_u8), m, kp, address(packed), n, address(corr), *ptrs)
    return out


def linear_int8(x: np.ndarray, w: np.ndarray, w_scale: np.ndarray,
                bias: np.ndarray | None) -> np.ndarray | None:
    """The int8 scheme's Linear fused in qgemm.c: per-row dynamic int8 quantization of x
    [M, K] float32, x_q . w^T in int32, then (float(acc) * s_row) * w_scale (+ bias), equal
    bit for bit to the NumPy steps in quant/modules.py. None where qgemm.c is not in use."""
    if not _state["loaded"]:
        _load()
    lib = _state["vnni"]
    if lib is None or x.dtype != np.float32 or w.dtype != np.int8 or x.ndim != 2 \
            or not x.flags.c_contiguous or w_scale.dtype != np.float32 \
            or (bias is not None and bias.dtype != np.float32):
        return None
    m, k = x.shape
    if m == 0 or k == 0:
        return None
    mp, kp = _round_up(m, _state["tile"][0]), _round_up(k, 4)
    a = np.empty((mp, kp), np.uint8)
    row_scale = np.empty(m, np.float32)
    lib.qgemm_quantize_rows(address(x), m, k, mp, kp, address(a), address(row_scale))
    return _vnni(a, m, w, (row_scale, np.ascontiguousarray(w_scale),
                           None if bias is None else np.ascontiguousarray(bias)))


def weight_correction(w: np.ndarray) -> np.ndarray:
    """-128 * row sums of an int8 weight [N, K]: what the +128 shift adds, as int32 [N]."""
    return (w.sum(axis=1, dtype=np.int64) * -128).astype(np.int32)


def _mkl(a: np.ndarray, w: np.ndarray, correction: np.ndarray | None) -> np.ndarray:
    (m, k), n = a.shape, w.shape[0]
    shifted = np.bitwise_xor(a.view(np.uint8), np.uint8(0x80))  # a + 128, as uint8
    w = np.ascontiguousarray(w)
    out = np.empty((m, n), np.int32)
    zero = np.zeros(1, np.int32)
    threads.for_product(m * n * k)  # one thread for small products
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
    if m == 0 or k == 0 or w.shape[0] == 0:
        return _numpy(a, w)
    if _state["vnni"] is not None:
        return _vnni_matmul(a, w)
    if _state["fn"] is None:
        return _numpy(a, w)
    return _mkl(np.ascontiguousarray(a), w, correction)


def dequantize_weight(q: np.ndarray, bits: int, shape: tuple[int, int], group: int,
                      scales: np.ndarray) -> np.ndarray | None:
    """The float32 [n, k] weight of symmetric int8 (bits 8) or packed int4 (bits 4) data
    with a scale per `group` inputs of each row, in one pass (qgemm.c); None where qgemm.c
    is not in use. float16 scales (per-group int4) are widened to float32 first (exact)."""
    if not _state["loaded"]:
        _load()
    lib = _state["vnni"]
    n, k = shape
    if scales.dtype == np.float16:  # qgemm.c takes float*; the array is small (k / group)
        scales = np.ascontiguousarray(scales, np.float32)
    if lib is None or not q.flags.c_contiguous or scales.dtype != np.float32 \
            or not scales.flags.c_contiguous or scales.size != n * (k // max(group, 1)) \
            or group <= 0 or k % group or q.size != n * (k if bits == 8 else (k + 1) // 2):
        return None
    out = np.empty(shape, np.float32)
    lib.qgemm_dequantize(address(q), bits, n, k, group, address(scales), address(out))
    return out
