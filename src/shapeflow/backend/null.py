"""The meta device's kernel table and array namespace: every call computes nothing (None).

A tensor on meta has a shape and a dtype but no array; ops skip their forward there (apply
reads the missing array), and what an op's backward or a factory asks of the device (a
zeros array for a gradient, an allocation) comes back as None, the meta tensor's data, so
no op branches on the device to stay data-free (as tinygrad's NULL device).
"""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext


def _nothing(*args, **kwargs) -> None:
    return None


class NullNamespace:
    """An array namespace whose every function returns None."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _nothing

    @staticmethod
    def errstate(**kwargs) -> nullcontext:
        """NumPy's floating-point error context: nothing to guard where nothing runs."""
        return nullcontext()

    def __repr__(self) -> str:
        return "<null array namespace>"


class NullKernels:
    """A kernel table whose every kernel returns None."""

    name = "null"
    path = "null"

    def __init__(self) -> None:
        self.xp = NullNamespace()
        self.stats: Counter = Counter()

    def ran(self, kernel: str, path: str) -> None:
        pass

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _nothing

    def __repr__(self) -> str:
        return "<NullKernels meta>"
