"""How many threads the BLAS products use: torch.set_num_threads' counterpart.

An MKL product of at least SMALL_MACS multiply-adds runs on get_num_threads() threads; a
smaller one runs on the calling thread alone, as PyTorch's intra-op grain size keeps small
work serial: waking a thread team costs more than it saves there, and on a loaded machine
the team's spinning threads fight other processes for the cores (a 10 s training took
135-311 s). NumPy's OpenBLAS gets the same count (it keeps products below 2^18 serial
itself).
"""

from __future__ import annotations

import ctypes
import glob
import operator
import os
import threading

from ...errors import ArgumentError

# below this many multiply-adds a product runs on one thread (2^20: ~20 us of one core's
# sgemm; on the 2-core, loaded machine this was tuned on, 2 threads lost at every size)
SMALL_MACS = 1 << 20
_state: dict = {"threads": None, "interop": None, "mkl": None, "openblas": None,
                "loaded": False}


class _Local(threading.local):
    """The MKL thread count this thread last set (MKL's local setting is per thread)."""

    mkl = 0  # 0: not set, MKL's global count applies


_local = _Local()


def _load() -> None:
    """MKL's and OpenBLAS's thread setters, where those libraries are loaded."""
    from . import gemm

    _state["loaded"] = True
    lib = gemm.mkl_library()
    if lib is not None:  # the C names: the lower-case ones are Fortran's (by reference)
        try:
            fns = lib.MKL_Set_Num_Threads, lib.MKL_Set_Num_Threads_Local, lib.MKL_Get_Max_Threads
        except AttributeError:
            fns = None
        if fns is not None:
            fns[0].argtypes, fns[0].restype = [ctypes.c_int], None
            fns[1].argtypes, fns[1].restype = [ctypes.c_int], ctypes.c_int
            fns[2].argtypes, fns[2].restype = [], ctypes.c_int
            _state["mkl"] = fns
    _state["openblas"] = _openblas()
    if _state.get("default") is None:
        _state["default"] = _default()


def _openblas():
    """(set, get) of the OpenBLAS NumPy's wheel bundles, or None."""
    import numpy as np

    root = os.path.dirname(os.path.dirname(np.__file__))
    for path in sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""),
                               ("openblas", "64_"), ("openblas", "")):
            setter = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            getter = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None


def _default() -> int:
    """PyTorch's default: the OMP_NUM_THREADS count, else MKL's (the physical cores), else
    the CPUs this process may run on."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    # not MKL's current count: a product's local setting (or another library) may have
    # changed it before this runs, and the default must not depend on the order of calls
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    return max(1, min(usable, _physical_cores() or usable))


def _physical_cores() -> int | None:
    """Distinct (package, core) pairs in /proc/cpuinfo: hyperthreads count once, as in
    PyTorch's default; None where the file says nothing."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return None
    cores, package = set(), "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            package = value.strip()
        elif key == "core id":
            cores.add((package, value.strip()))
    return len(cores) or None


def _positive(name: str, n) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        try:
            n = operator.index(n)
        except TypeError:
            raise ArgumentError(f"{name} expects an int, but got {type(n).__name__}",
                                op=name) from None
    if n <= 0:
        raise ArgumentError(f"{name} expects a positive integer, got {n}", op=name)
    return int(n)


def get_num_threads() -> int:
    """The threads a large product uses (PyTorch's intra-op thread count)."""
    if not _state["loaded"]:
        _load()
    return _state["threads"] or _state["default"]


def set_num_threads(n: int) -> None:
    """Use n threads for large products (MKL's and NumPy's OpenBLAS); small ones stay on one."""
    n = _positive("set_num_threads", n)
    if not _state["loaded"]:
        _load()
    _state["threads"] = n
    if _state["mkl"] is not None:
        _state["mkl"][0](n)
        _state["mkl"][1](0)  # this thread back on the global count until its next product
        _local.mkl = 0
    if _state["openblas"] is not None:
        _state["openblas"][0](n)


def get_num_interop_threads() -> int:
    """PyTorch's inter-op thread count: kept for ported code; shapeflow runs ops in order."""
    if _state["interop"] is None:
        return get_num_threads()
    return _state["interop"]


def set_num_interop_threads(n: int) -> None:
    """Record PyTorch's inter-op thread count (shapeflow has no inter-op pool to size)."""
    _state["interop"] = _positive("set_num_interop_threads", n)


def for_product(macs: int) -> None:
    """Before an MKL call of `macs` multiply-adds: one thread below SMALL_MACS, else
    get_num_threads() (set only when this thread's count changes: a ctypes call is ~1 us)."""
    want = 1 if macs < SMALL_MACS else (_state["threads"] or get_num_threads())
    if _local.mkl != want:
        if not _state["loaded"]:
            _load()
        if _state["mkl"] is not None:
            _state["mkl"][1](want)
        _local.mkl = want


def blas_threads() -> dict[str, int]:
    """The thread counts the loaded BLAS libraries report now, for this thread ('mkl',
    'openblas'): what a check of set_num_threads reads."""
    if not _state["loaded"]:
        _load()
    out = {}
    if _state["mkl"] is not None:
        out["mkl"] = _state["mkl"][2]()
    if _state["openblas"] is not None:
        out["openblas"] = _state["openblas"][1]()
    return out


# read when shapeflow is imported, as PyTorch reads OMP_NUM_THREADS at its start: code that
# sets the variable later (a benchmark module imported by a test) changes nothing
_state["default"] = _default()
