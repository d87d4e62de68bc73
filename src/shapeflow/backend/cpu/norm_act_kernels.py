"""SiLU forward and backward from norm_act_kernels.c, called through ctypes; None means NumPy.

The library (`_norm_act_kernels`, built by setup.py for the CPU that compiles it) is used
only when it loaded, this CPU has every instruction set it was built for, it was built from
the norm_act_kernels.c beside this file (a stale build is refused), and SHAPEFLOW_KERNELS is
not "0". Each wrapper takes float32 arrays and returns None for anything else.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np

from . import native
from .kernels import address

_P, _N = ctypes.c_void_p, ctypes.c_ssize_t
_SIGNATURES = {
    "silu_f32": [_P, _P, _N],
    "silu_backward_f32": [_P, _P, _P, _N],
}
_FILE = os.path.join(os.path.dirname(__file__), "norm_act_kernels.c")
_F32 = np.dtype(np.float32)
_state: dict = {"loaded": False, "lib": None, "enabled": True, "refused": None}


def _library():
    return native.load("_norm_act_kernels", _FILE, "norm_act", _SIGNATURES, _state)


def _lib():
    if not _state["enabled"]:
        return None
    if not _state["loaded"]:
        _state["loaded"] = True
        _state["lib"] = _library()
    return _state["lib"]


def available() -> bool:
    """Whether the compiled SiLU kernels are in use."""
    return _lib() is not None


def set_enabled(flag: bool) -> bool:
    """Turn the compiled kernels on or off (tests compare both paths); returns the old flag."""
    old = _state["enabled"]
    _state["enabled"] = bool(flag)
    return old


def _contiguous_f32(a: np.ndarray) -> np.ndarray | None:
    if a.dtype != _F32:
        return None
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def silu(x: np.ndarray) -> np.ndarray | None:
    """x * sigmoid(x) in one pass (float32), or None."""
    lib = _lib()
    if lib is None or x.size == 0 or (x := _contiguous_f32(x)) is None:
        return None
    out = np.empty(x.shape, _F32)
    lib.silu_f32(address(x), address(out), x.size)
    return out


def silu_backward(g: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """g * d silu(x) / dx in one pass (float32, g and x of one shape), or None."""
    lib = _lib()
    if lib is None or x.size == 0 or g.shape != x.shape or g.dtype != _F32:
        return None
    if (x := _contiguous_f32(x)) is None:
        return None
    g = g if g.flags.c_contiguous else np.ascontiguousarray(g)
    out = np.empty(x.shape, _F32)
    lib.silu_backward_f32(address(g), address(x), address(out), x.size)
    return out
