"""The LSTM cell's step from rnn_cell_kernels.c, called through ctypes; None means "use NumPy".

The library (`_rnn_cell_kernels`, built by setup.py for the CPU that compiles it) is used
only when it loaded, this CPU has every instruction set it was built for, it was built from
the rnn_cell_kernels.c beside this file (a stale build is refused), and SHAPEFLOW_KERNELS is
not "0". Its products go through MKL's cblas_?gemm (backend/cpu/gemm.py's) when MKL is loaded:
then one call runs the whole step; without MKL the caller does the products with NumPy and
the kernel the rest.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from . import gemm, native

_P, _N = ctypes.c_void_p, ctypes.c_ssize_t
_SIGNATURES = {
    "lstm_cell_step_f64": [_P, _P, _N, _N] + [_P] * 8 + [_N, _N],
    "lstm_cell_step_f32": [_P, _P, _N, _N] + [_P] * 8 + [_N, _N],
    "lstm_cell_step_backward_f64": [_P] * 6 + [_N, _N] + [_P] * 11 + [_N, _N],
    "lstm_cell_step_backward_f32": [_P] * 6 + [_N, _N] + [_P] * 11 + [_N, _N],
    "rnn_cell_sigmoid_f64": [_P, _P, _N],
    "rnn_cell_tanh_f64": [_P, _P, _N],
}
_FILE = os.path.join(os.path.dirname(__file__), "rnn_cell_kernels.c")
_state: dict = {"loaded": False, "lib": None, "enabled": True, "refused": None,
                "use_gemm": True}


class Step:
    """One dtype's kernels: `forward` and `backward` (raw ctypes functions) and `gemm`, the
    address of the cblas ?gemm they call (None: the caller does the products)."""

    __slots__ = ("forward", "backward", "gemm")

    def __init__(self, forward, backward, gemm_addr: int | None) -> None:
        self.forward, self.backward, self.gemm = forward, backward, gemm_addr


_steps: dict = {}  # numpy dtype -> Step, filled on first use


def _library():
    return native.load("_rnn_cell_kernels", _FILE, "rnn_cell", _SIGNATURES, _state)


def _lib():
    if not _state["enabled"]:
        return None
    if not _state["loaded"]:
        _state["loaded"] = True
        _state["lib"] = _library()
    return _state["lib"]


def step(dtype: np.dtype) -> Step | None:
    """The LSTM cell kernels for float32 or float64 arrays, or None (NumPy does the step)."""
    s = _steps.get(dtype)
    if s is not None or not _state["enabled"]:
        return s
    lib = _lib()
    if lib is None or dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return None
    suffix = "f32" if dtype == np.float32 else "f64"
    addr = _gemm_address(suffix) if _state["use_gemm"] else None
    s = _steps[dtype] = Step(getattr(lib, f"lstm_cell_step_{suffix}"),
                             getattr(lib, f"lstm_cell_step_backward_{suffix}"), addr)
    return s


def _gemm_address(suffix: str) -> int | None:
    """The address of MKL's cblas_sgemm / cblas_dgemm where gemm.py multiplies with MKL."""
    if gemm.backend() != "mkl":
        return None
    lib = gemm.mkl_library()
    fn = None if lib is None else getattr(lib, "cblas_sgemm" if suffix == "f32" else
                                          "cblas_dgemm", None)
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


def available() -> bool:
    """Whether the compiled LSTM cell kernels are in use."""
    return _lib() is not None


def set_enabled(flag: bool, use_gemm: bool = True) -> bool:
    """Turn the kernels on or off, and their own MKL products (tests compare the three
    paths: one call, the kernel with NumPy's products, NumPy); returns the old flag."""
    old = _state["enabled"]
    _state["enabled"], _state["use_gemm"] = bool(flag), bool(use_gemm)
    _steps.clear()
    return old


def activation(name: str, x: np.ndarray) -> np.ndarray | None:
    """The kernels' float64 sigmoid or tanh of every element of x (for tests), or None."""
    lib = _lib()
    if lib is None:
        return None
    x = np.ascontiguousarray(x, np.float64)
    out = np.empty_like(x)
    getattr(lib, f"rnn_cell_{name}_f64")(x.ctypes.data, out.ctypes.data, x.size)
    return out
