"""`torch.nn.modules.utils`: the `_pair`-style argument helpers layers use, as PyTorch's."""

from __future__ import annotations

import collections.abc
from itertools import repeat

from ._paths import file_names as _file_names

__getattr__, __dir__ = _file_names(__name__)


def _ntuple(n: int, name: str = "parse"):
    """A function making an n-tuple of one value, or a tuple of an iterable (PyTorch's)."""

    def parse(x) -> tuple:
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")
