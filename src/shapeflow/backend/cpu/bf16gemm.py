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

from ...errors import ShapeError
from .kernels import _cpu_flags, address

_P, _N = ctypes.c_void_p, ctypes.c_ssize_t
_FILE = os.path.join(os.path.dirname(__file__), "bf16gemm.c")
_state: dict = {"loaded": False, "fn": None, "fn16": None, "refused": None}


def _library():
    """bf16gemm.c's gemm where it was built from this source, for a CPU with AVX512-BF16."""
    from importlib.util import find_spec

    if os.environ.get("SHAPEFLOW_BF16GEMM", "") == "0" or \
            os.environ.get("SHAPEFLOW_KERNELS", "") == "0" or \
            os.environ.get("SHAPEFLOW_BLAS", "").lower() == "numpy":
        return None
    spec = find_spec("shapeflow.backend.cpu._bf16gemm")  # plain C: found, not imported
    if spec is None or not spec.origin:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
        built = ctypes.string_at(ctypes.addressof(
            ctypes.c_char.in_dll(lib, "shapeflow_bf16gemm_source"))).decode()
        supported = lib.bf16gemm_supported
        fn, fn16 = lib.bf16gemm, lib.bf16gemm_bf16
    except (OSError, ValueError, AttributeError):
        return None
    from .native import source_digest  # setup.py's rule: the source, then isa.h

    digest = source_digest(_FILE)
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
    fn16.argtypes, fn16.restype = [_P, _N, _N, _P, _N, _N, _P, _P, _N, _N, _N, _N], ctypes.c_int
    return fn, fn16


def _load() -> None:
    _state["loaded"] = True
    _state["fn"], _state["fn16"] = _library() or (None, None)
    if _state["fn"] is not None and not _self_check():
        _state["fn"] = _state["fn16"] = None
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
        raise ShapeError(f"bf16gemm: shapes {a.shape} @ {b.shape} -> {out.shape}",
                         op="bf16gemm")
    if _state["fn"](address(a), a.strides[0] // 2, a.strides[1] // 2, address(b),
                    b.strides[0] // 2, b.strides[1] // 2, address(out), out.strides[0] // 4,
                    m, n, k) != 0:
        raise MemoryError("bf16gemm: could not allocate its packing buffers")


def matmul_bf16(a: np.ndarray, b: np.ndarray, bias32: np.ndarray | None = None,
                out: np.ndarray | None = None) -> np.ndarray | None:
    """a @ b (+ bias32, float32) for 2-D bfloat16 operands of any strides, rounded once to a
    bfloat16 `out` (rows contiguous; made when None): no float32 result is ever made. None
    where the kernel declines (k beyond what one panel keeps in L2)."""
    (m, k), n = a.shape, b.shape[1]
    if out is None:
        out = np.empty((m, n), ml_dtypes.bfloat16)
    if b.shape[0] != k or out.shape != (m, n) or out.strides[1] != 2 or (
            bias32 is not None and (bias32.shape != (n,) or bias32.dtype != np.float32
                                    or not bias32.flags.c_contiguous)):
        raise ShapeError(f"bf16gemm: shapes {a.shape} @ {b.shape} -> {out.shape}",
                         op="bf16gemm")
    rc = _state["fn16"](address(a), a.strides[0] // 2, a.strides[1] // 2, address(b),
                        b.strides[0] // 2, b.strides[1] // 2,
                        None if bias32 is None else address(bias32), address(out),
                        out.strides[0] // 2, m, n, k)
    if rc < 0:
        raise MemoryError("bf16gemm: could not allocate its packing buffers")
    return None if rc else out


def _self_check() -> bool:
    """The kernel against a float64 product on ragged shapes, both operand layouts."""
    rng = np.random.default_rng(0)
    bf = ml_dtypes.bfloat16
    for m, k, n in ((1, 1, 1), (13, 401, 37), (29, 6, 70)):
        a = rng.standard_normal((m, k)).astype(bf)
        b = rng.standard_normal((n, k)).astype(bf).T  # a transposed view
        out = np.zeros((m, n), np.float32)
        gemm_into(a, b, out)
        want = a.astype(np.float64) @ b.astype(np.float64)
        if not np.allclose(out, want, rtol=1e-5, atol=1e-5 * k):
            return False
        bias = rng.standard_normal(n).astype(np.float32)
        got = matmul_bf16(a.T.copy().T, b, bias)  # a column-major copy: the other layout
        if got is None or not np.allclose(got.astype(np.float64), want + bias,
                                          rtol=2 ** -7, atol=1e-5 * k):
            return False
    return True
