"""bfloat16 products through bf16gemm.c (AVX512-BF16 vdpbf16ps, float32 accumulate).

On the AMD EPYC (Zen 4, AVX512-BF16, no AMX) this was written on, MKL's gemm_bf16bf16f32
ran at its sgemm's speed (~89 GFLOP/s at 1024^3, one thread) and bf16gemm.c at ~195, so
gemm.py takes this path first for bfloat16. SHAPEFLOW_BF16GEMM=0 (or SHAPEFLOW_KERNELS=0,
SHAPEFLOW_BLAS=numpy) skips it. The library must be built from this bf16gemm.c, on a CPU
with AVX512-BF16, and pass a self-check against a float64 reference at load.
"""

from __future__ import annotations

import ctypes
import os

import ml_dtypes
import numpy as np

from .kernels import _cpu_flags, address

_P, _N = ctypes.c_void_p, ctypes.c_ssize_t
_FILE = os.path.join(os.path.dirname(__file__), "bf16gemm.c")
_state: dict = {"loaded": False, "fn": None, "fn16": None, "refused": None}
_BF16 = np.dtype(ml_dtypes.bfloat16)


def _library():
    """bf16gemm.c's (float32-output, bfloat16-output) gemms where it was built from this
    source, for a CPU with AVX512-BF16."""
    import hashlib
    from importlib.util import find_spec

    if os.environ.get("SHAPEFLOW_BF16GEMM", "") == "0" or \
            os.environ.get("SHAPEFLOW_KERNELS", "") == "0" or \
            os.environ.get("SHAPEFLOW_BLAS", "").lower() == "numpy":
        return None
    spec = find_spec("shapeflow.backend._bf16gemm")  # plain C: found, not imported
    if spec is None or not spec.origin:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
        built = ctypes.string_at(ctypes.addressof(
            ctypes.c_char.in_dll(lib, "shapeflow_bf16gemm_source"))).decode()
        supported = lib.bf16gemm_supported
        fn = lib.bf16gemm
        fn16 = lib.bf16gemm_bf16
    except (OSError, ValueError, AttributeError):
        return None
    try:
        with open(_FILE, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        digest = None
    if digest is not None and built != digest:
        _state["refused"] = "built from another bf16gemm.c: rebuild (python setup.py " \
                            "build_ext --inplace)"
        return None
    supported.restype = ctypes.c_int
    flags = _cpu_flags()
    if not supported() or (flags is not None and "avx512_bf16" not in flags):
        _state["refused"] = "built for AVX512-BF16, which this CPU lacks"
        return None
    fn.argtypes, fn.restype = [_P, _N, _N, _P, _N, _N, _P, _N, _N, _N, _N], ctypes.c_int
    fn16.argtypes = [_P, _N, _N, _P, _N, _N, _P, _P, _N, _N, _N, _N]
    fn16.restype = ctypes.c_int
    return fn, fn16


def _load() -> None:
    _state["loaded"] = True
    fns = _library()
    _state["fn"], _state["fn16"] = (None, None) if fns is None else fns
    if _state["fn"] is not None and not _self_check():
        _state["fn"], _state["fn16"] = None, None
        _state["refused"] = "bf16gemm.c failed its self-check"


def available() -> bool:
    """Whether the AVX512-BF16 kernel is loaded (and allowed) in this process."""
    if not _state["loaded"]:
        _load()
    return _state["fn"] is not None


def gemm_into(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out (float32, rows contiguous, holding zeros or the bias) += a @ b, bfloat16 2-D
    operands of any strides."""
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or out.shape != (m, n) or out.strides[1] != 4:
        raise ValueError(f"bf16gemm: shapes {a.shape} @ {b.shape} -> {out.shape}")
    if _state["fn"](address(a), a.strides[0] // 2, a.strides[1] // 2, address(b),
                    b.strides[0] // 2, b.strides[1] // 2, address(out), out.strides[0] // 4,
                    m, n, k) != 0:
        raise MemoryError("bf16gemm: could not allocate its packing buffers")


def gemm_bf16(a: np.ndarray, b: np.ndarray, bias32: np.ndarray | None = None,
              out: np.ndarray | None = None) -> np.ndarray:
    """a @ b (+ bias32, float32 [n]) summed in float32 and rounded once to bfloat16, for
    bfloat16 2-D operands of any strides, with no float32 [m, n] scratch: into `out`
    (bfloat16 [m, n], rows contiguous) or a new array, which is returned.

    Bit for bit gemm_into's float32 result (bias first, then each 384-long k block's sum
    in k order) rounded by kernels.narrow."""
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or a.dtype != _BF16 or b.dtype != _BF16:
        raise ValueError(f"bf16gemm: operands {a.shape} {a.dtype} @ {b.shape} {b.dtype}")
    if bias32 is not None:
        bias32 = np.ascontiguousarray(bias32, np.float32)
        if bias32.shape != (n,):
            raise ValueError(f"bf16gemm: bias of shape {bias32.shape} for {n} columns")
    if out is None:
        out = np.empty((m, n), _BF16)
    elif out.shape != (m, n) or out.dtype != _BF16 or out.strides[1] != 2 or \
            out.strides[0] % 2:
        raise ValueError(f"bf16gemm: output {out.shape} {out.dtype} for {(m, n)}")
    if _state["fn16"](address(a), a.strides[0] // 2, a.strides[1] // 2, address(b),
                      b.strides[0] // 2, b.strides[1] // 2,
                      None if bias32 is None else address(bias32), address(out),
                      out.strides[0] // 2,
                      m, n, k) != 0:
        raise MemoryError("bf16gemm: could not allocate its packing buffers")
    return out


def _self_check() -> bool:
    """Both kernels against a float64 product on ragged shapes and all four operand
    layouts; the bfloat16 output bit for bit the float32 one rounded."""
    from .kernels import narrow

    rng = np.random.default_rng(0)
    for i, (m, k, n) in enumerate(((1, 1, 1), (13, 401, 37), (29, 6, 70), (25, 800, 33))):
        a = rng.standard_normal((k, m) if i % 2 else (m, k)).astype(_BF16)
        b = rng.standard_normal((n, k) if i < 2 else (k, n)).astype(_BF16)
        a, b = (a.T if i % 2 else a), (b.T if i < 2 else b)
        bias = rng.standard_normal(n).astype(np.float32) if i % 2 else None
        out = np.zeros((m, n), np.float32) if bias is None else np.tile(bias, (m, 1))
        gemm_into(a, b, out)
        want = a.astype(np.float64) @ b.astype(np.float64)
        if bias is not None:
            want += bias
        if not np.allclose(out, want, rtol=1e-5, atol=1e-5 * k):
            return False
        if not np.array_equal(gemm_bf16(a, b, bias).view(np.uint16),
                              narrow(out, _BF16).view(np.uint16)):
            return False
    return True
