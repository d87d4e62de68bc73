"""A cache of large NumPy data buffers, so fresh large temporaries stop costing page faults.

glibc returns large freed blocks to the OS, so every new large array (an op's output in a
training step, 128 KiB to tens of MiB) faults its pages in again: about 8% of a GPT step.
`enable()` installs a NumPy memory handler (the C extension `_alloc`) that keeps freed
blocks of at least `min_cached` bytes and hands them to the next array of the same size
class (sizes rounded up to 4 KiB). The cost: up to `max_bytes` of freed memory stays held.
The handler applies to the context (thread) that calls `enable()`; arrays remember the
handler that allocated them, so `disable()` is safe with arrays still alive.
SHAPEFLOW_BUFFER_CACHE=0 turns `enable()` into a no-op.
"""

from __future__ import annotations

import os

try:
    from shapeflow.backend.cpu import _alloc
except ImportError:  # the optional extension did not build
    _alloc = None

DEFAULT_MAX_BYTES = 512 * 2**20
DEFAULT_MIN_CACHED = 128 * 2**10  # glibc maps blocks from 128 KiB up fresh (M_MMAP_THRESHOLD)
_KEYS = ("hits", "misses", "cached_bytes", "cached_blocks", "evictions", "dropped",
         "peak_cached_bytes", "max_bytes", "min_cached")


def available() -> bool:
    """Whether the extension is built and SHAPEFLOW_BUFFER_CACHE is not "0"."""
    return _alloc is not None and os.environ.get("SHAPEFLOW_BUFFER_CACHE", "") != "0"


def enable(max_bytes: int = DEFAULT_MAX_BYTES, min_cached: int = DEFAULT_MIN_CACHED) -> bool:
    """Install the cache (again: update its limits); False when unavailable."""
    if not available():
        return False
    if max_bytes < 0 or min_cached < 1:
        raise ValueError(f"need max_bytes >= 0 and min_cached >= 1, got {max_bytes}, "
                         f"{min_cached}")
    _alloc.install(int(max_bytes), int(min_cached))
    return True


def disable() -> None:
    """Restore the previous NumPy handler and release every cached block."""
    if _alloc is not None:
        _alloc.uninstall()


def clear() -> None:
    """Release every cached block; the cache stays installed."""
    if _alloc is not None:
        _alloc.clear()


def enabled() -> bool:
    """Whether enable() installed the cache and disable() has not removed it."""
    return _alloc is not None and bool(_alloc.stats()["installed"])


def stats() -> dict:
    """Counters (hits, misses, evictions, ...) and limits; zeros when unavailable."""
    if _alloc is None:
        return dict.fromkeys(_KEYS, 0) | {"installed": False}
    return _alloc.stats()
