"""Autocast state, per thread as in PyTorch: whether listed ops run in a lower precision.

`hot.on` (a plain attribute, one read in each listed op's function) is True while any
thread is inside an enabled autocast region; the op then reads this thread's `state`. Code
that never enters autocast pays that one attribute read in the listed ops and nothing else.
"""

from __future__ import annotations

import threading


class _Hot:
    def __init__(self) -> None:
        self.on = False  # some thread is inside an enabled autocast region


hot = _Hot()
_lock = threading.RLock()
_on_count = 0


class _On:
    """Held by a thread while its autocast is enabled; counted in `hot.on`.

    A thread that ends inside a region drops it with its other thread-local values.
    """

    __slots__ = ()

    def __init__(self) -> None:
        global _on_count
        with _lock:
            _on_count += 1
            hot.on = True

    def __del__(self) -> None:
        global _on_count
        with _lock:
            _on_count -= 1
            hot.on = _on_count > 0


class _State(threading.local):
    """This thread's autocast settings (__init__ runs once in each thread that reads them)."""

    def __init__(self) -> None:
        from ..dtypes import bfloat16

        self.enabled = False
        self.dtype = bfloat16  # PyTorch's default for the cpu
        self.cache_enabled = True
        self.nesting = 0  # autocast regions entered and not left (enabled or not)
        # id(fp32 leaf) -> (the leaf, its low-precision copy): one cast per weight per region
        self.cache: dict = {}
        self.held: _On | None = None

    def set_enabled(self, enabled: bool) -> None:
        self.enabled = enabled
        if enabled and self.held is None:
            self.held = _On()
        elif not enabled and self.held is not None:
            self.held = None


state = _State()
