"""Loading the plain-C kernel libraries setup.py builds, one rule for all of them.

A library is used only when it loads, exports the functions its module names, was built from
the C sources beside it (each records the sha256 of its sources, `source_digest`: a stale
build has the same names with other semantics), for instructions this CPU has, and none of
its switches (by default SHAPEFLOW_KERNELS) is "0". Otherwise the caller's NumPy path runs,
and `state`["refused"] says why, for `shapeflow --version` and the tests.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

from .kernels import _cpu_flags


def library_files(source: str) -> list[str]:
    """The files a library is built from, in the order its digest reads them: `source`
    (<stem>.c), then every <stem>_*.c and <stem>_*.h beside it by name, then the shared
    isa.h (setup.py's rule)."""
    folder, name = os.path.split(source)
    stem = name.removesuffix(".c")
    try:
        names = os.listdir(folder or ".")
    except OSError:
        names = []
    parts = sorted(n for n in names if n.startswith(f"{stem}_") and n.endswith((".c", ".h")))
    # isa.h last: the instruction-set record every library includes is part of each build
    shared = ["isa.h"] if "isa.h" in names else []
    return [source, *(os.path.join(folder, n) for n in (*parts, *shared))]


def source_digest(source: str) -> str | None:
    """The sha256 of a library's files read one after another (what setup.py records), or
    None where `source` is not installed (a copy without its sources: the build is trusted)."""
    import hashlib  # here: `import shapeflow` need not pay for OpenSSL

    h = hashlib.sha256()
    try:
        for path in library_files(source):
            with open(path, "rb") as f:
                h.update(f.read())
    except OSError:
        return None
    return h.hexdigest()


def _string(lib: ctypes.CDLL, symbol: str) -> str:
    return ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, symbol))).decode()


def load(module: str, source: str, tag: str, signatures: dict, state: dict, restype=None,
         switches: Iterable[str] = ("SHAPEFLOW_KERNELS",)) -> ctypes.CDLL | None:
    """shapeflow.backend.cpu.<module> with `signatures` ({name: argtypes}) set, or None.

    `source` is the path of the C file it must have been built from (with its family files,
    `library_files`); the library exports
    `shapeflow_<tag>_isa` and `shapeflow_<tag>_source` (the instruction sets it assumed, its
    source's sha256)."""
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
    digest = source_digest(source)
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
