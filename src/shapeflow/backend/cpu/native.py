"""Loading the plain-C kernel libraries setup.py builds, one rule for all of them.

A library is used only when it loads, exports the functions its module names, was built from
the C source beside it (each records the sha256 of its source: a stale build has the same
names with other semantics), for instructions this CPU has, and none of its switches (by
default SHAPEFLOW_KERNELS) is "0". Otherwise the caller's NumPy path runs, and `state`
["refused"] says why, for `shapeflow --version` and the tests.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

from .kernels import _cpu_flags


def _string(lib: ctypes.CDLL, symbol: str) -> str:
    return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, symbol))).decode()


def load(module: str, source: str, tag: str, signatures: dict, state: dict, restype=None,
         switches: Iterable[str] = ("SHAPEFLOW_KERNELS",)) -> ctypes.CDLL | None:
    """shapeflow.backend.cpu.<module> with `signatures` ({name: argtypes}) set, or None.

    `source` is the path of the C file it must have been built from; the library exports
    `shapeflow_<tag>_isa` and `shapeflow_<tag>_source` (the instruction sets it assumed, its
    source's sha256)."""
    import hashlib  # here: `import shapeflow` need not pay for OpenSSL
    from importlib.util import find_spec

    if any(os.environ.get(name, "") == "0" for name in switches):
        return None
    spec = find_spec(f"shapeflow.backend.cpu.{module}")  # plain C: found, not imported
    if spec is None or not spec.origin:
        return None
    name = os.path.basename(source)
    try:
        lib = ctypes.CDLL(spec.origin)
        isa, built = _string(lib, f"shapeflow_{tag}_isa"), _string(lib, f"shapeflow_{tag}_source")
        fns = {fn: getattr(lib, fn) for fn in signatures}
    except (OSError, ValueError, AttributeError):
        state["refused"] = f"not loadable, or built from an older {name}: rebuild it"
        return None
    try:
        with open(source, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:  # an installed copy without its sources: trust the build
        digest = None
    if digest is not None and built != digest:
        state["refused"] = (f"built from another {name}: rebuild it "
                            "(python setup.py build_ext --inplace)")
        return None
    flags = _cpu_flags()
    if flags is not None and not set(isa.split()) <= flags:
        state["refused"] = "built for instructions this CPU lacks"
        return None
    for fn_name, fn in fns.items():
        fn.argtypes, fn.restype = signatures[fn_name], restype
    return lib
