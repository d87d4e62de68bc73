"""`sf.autocast`: regions where the listed ops run in bfloat16 (or float16), as torch.autocast.

The op lists and the casts are `ops/autocast.py`'s; the state is per thread
(`autograd/autocast_state.py`). Leaving the outermost region clears the cast cache.
"""

from __future__ import annotations

import functools
import threading
import warnings

from .. import dtypes as _dt
from ..autograd.autocast_state import state
from ..errors import DeviceError

_SUPPORTED = (_dt.bfloat16, _dt.float16)  # what CPU autocast runs in (PyTorch's list)
_DEVICE_TYPES = ("cpu", "cuda", "meta")
_cache_default = [True]  # torch.is_autocast_cache_enabled(): the default of cache_enabled


def _check_device(device_type: str) -> str:
    if not isinstance(device_type, str):
        raise DeviceError(f"autocast: device_type must be a string, got "
                          f"{type(device_type).__name__}", hint="use device_type='cpu'")
    if device_type not in _DEVICE_TYPES:
        raise DeviceError(f"autocast: unknown device_type {device_type!r}",
                          hint="shapeflow autocasts on the cpu: device_type='cpu'")
    return device_type


class autocast:  # noqa: N801  (PyTorch's name)
    """Context manager and decorator: listed ops run in `dtype` inside (torch.autocast).

    Matrix products, linear, convolutions and attention run in `dtype` (float32 weights
    cast once per region); losses run in float32; everything else runs in its inputs'
    dtype. `enabled=False` turns autocast off inside an enabled region.
    """

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device = _check_device(device_type)
        self.fast_dtype = _dt.bfloat16 if dtype is None else _dt.get_dtype(dtype)
        self._enabled = bool(enabled)
        self._cache_enabled = _cache_default[0] if cache_enabled is None else bool(
            cache_enabled)
        if self.device == "cuda" and self._enabled:  # as PyTorch without a GPU
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. "
                          "Disabling", stacklevel=2)
            self._enabled = False
        if self._enabled and self.fast_dtype not in _SUPPORTED:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling "
                          "autocast.\nCPU Autocast only supports dtype of torch.bfloat16, "
                          "torch.float16 currently.", stacklevel=2)
            self._enabled = False
        # thread id -> the states this instance replaced there, innermost last: one instance
        # may be entered by several threads at once, and re-entered within one
        self._prev: dict[int, list] = {}

    def __enter__(self) -> autocast:
        st = state
        self._prev.setdefault(threading.get_ident(), []).append(
            (st.enabled, st.dtype, st.cache_enabled))
        st.nesting += 1
        st.dtype = self.fast_dtype
        st.cache_enabled = self._cache_enabled
        st.set_enabled(self._enabled)
        return self

    def __exit__(self, *exc) -> bool:
        st = state
        st.nesting -= 1
        if st.nesting == 0:
            st.cache.clear()  # the low-precision weight copies live one outermost region
        tid = threading.get_ident()
        stack = self._prev[tid]
        enabled, st.dtype, st.cache_enabled = stack.pop()
        if not stack:  # dropped, so that ended threads leave nothing behind
            del self._prev[tid]
        st.set_enabled(enabled)
        return False

    def __call__(self, fn):
        """Use as a decorator: each call of `fn` runs inside this region."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper

    def __repr__(self) -> str:
        return (f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, "
                f"enabled={self._enabled})")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether this thread is inside an enabled autocast region (shapeflow has only the cpu)."""
    if device_type is not None and _check_device(device_type) == "cuda":
        return False
    return state.enabled


def is_autocast_cpu_enabled() -> bool:
    """Whether this thread's cpu autocast is on (PyTorch's older name)."""
    return state.enabled


def get_autocast_dtype(device_type: str = "cpu"):
    """The dtype this thread's autocast regions run the listed ops in."""
    _check_device(device_type)
    return state.dtype


def get_autocast_cpu_dtype():
    """The cpu autocast dtype (PyTorch's older name)."""
    return state.dtype


def set_autocast_enabled(device_type: str, enabled: bool) -> None:
    """Turn this thread's autocast on or off without a region (PyTorch's low-level switch)."""
    _check_device(device_type)
    state.set_enabled(bool(enabled))


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype this thread's autocast runs in without a region."""
    _check_device(device_type)
    state.dtype = _dt.get_dtype(dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether new regions cache the low-precision copies of weights (default True)."""
    return _cache_default[0]


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Whether regions made without cache_enabled cache weight copies."""
    _cache_default[0] = bool(enabled)


def clear_autocast_cache() -> None:
    """Drop this thread's cached low-precision weight copies."""
    state.cache.clear()


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast can run on `device_type` here (the cpu, as torch.amp's)."""
    return device_type in ("cpu", "meta")
