"""One matrix packed once for many products (MKL's cblas_sgemm_pack / sgemm_compute).

A recurrent layer multiplies every step's [B, H] state by the same W_hh: packing W_hh into
MKL's internal layout once per sequence spares each of the L products that copy (about 4%
of the step's gemm at B 32, H 256). Without MKL, for other dtypes, or for a product whose
row count is not the packed one, `acc` is gemm.matmul_acc.
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import gemm
from .kernels import address

_ROW_MAJOR, _NO_TRANS, _TRANS, _PACKED, _B_MATRIX = 101, 111, 112, 151, 162
_state: dict = {"loaded": False, "pack": None, "compute": None, "size": None}


def _load() -> None:
    _state["loaded"] = True
    if gemm.backend() != "mkl":
        return
    lib = gemm.mkl_library()
    try:
        size, pack, compute = (lib.cblas_sgemm_pack_get_size, lib.cblas_sgemm_pack,
                               lib.cblas_sgemm_compute)
    except AttributeError:  # no MKL, or one without the packed API
        return
    i32, ptr, f32 = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
    size.argtypes, size.restype = [i32] * 4, ctypes.c_size_t
    pack.argtypes, pack.restype = [i32] * 6 + [f32, ptr, i32, ptr], None
    compute.argtypes = [i32] * 6 + [ptr, i32, ptr, i32, f32, ptr, i32]
    compute.restype = None
    _state.update(pack=pack, compute=compute, size=size)


class Packed:
    """b [k, n] ready for out += a @ b with a of m rows (float32, MKL); else plain gemm."""

    def __init__(self, b: np.ndarray, m: int) -> None:
        if not _state["loaded"]:
            _load()
        self.b, self.m, self.buf = b, m, None
        op = gemm._operand(b) if b.ndim == 2 else None
        if _state["pack"] is None or b.dtype != np.float32 or op is None or m < 1 or \
                m * b.shape[0] * b.shape[1] < gemm.MIN_MACS:
            return
        k, n = b.shape
        nbytes = _state["size"](_B_MATRIX, m, n, k)
        self.raw = np.empty(nbytes + 64, np.uint8)
        start = (-self.raw.ctypes.data) % 64  # MKL wants its packed buffer 64-byte aligned
        self.buf = self.raw[start:start + nbytes].ctypes.data
        _state["pack"](_ROW_MAJOR, _B_MATRIX, op[0], m, n, k, 1.0, address(b), op[1],
                       self.buf)

    def acc(self, a: np.ndarray, out: np.ndarray) -> None:
        """out += a @ b in place; `out` may be a row block of a bigger array."""
        if self.buf is not None and a.shape[0] == self.m and a.dtype == np.float32 and \
                out.dtype == np.float32:
            oa, oo = gemm._operand(a), gemm._operand(out)
            k, n = self.b.shape
            if oa is not None and oo is not None and oo[0] == _NO_TRANS and \
                    a.shape[1] == k and out.shape == (self.m, n):
                gemm.threads.for_product(self.m * n * k)  # one thread for small ones
                _state["compute"](_ROW_MAJOR, oa[0], _PACKED, self.m, n, k, address(a), oa[1],
                                  self.buf, n, 1.0, address(out), oo[1])
                return
        gemm.matmul_acc(a, self.b, out)
