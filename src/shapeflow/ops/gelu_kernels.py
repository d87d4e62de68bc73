"""GELU's Phi(x) tables under their old names, for tests: the cpu kernel table's.

The tables and the blockwise interpolation live in the kernel tables
(backend/reference/elementwise.py, and a compiled pass in backend/cpu/ladder.py); GELU's ops
call `device.kernels.gelu_table` and `device.kernels.normal_cdf`.
"""

from __future__ import annotations

from ..device import cpu

_kernels = cpu.kernels
STEPS = _kernels.GELU_STEPS  # table entries per unit of x
CHUNK = _kernels.GELU_CHUNK  # elements per block of the portable kernel
_OFFSET = _kernels.GELU_OFFSET  # the table index of x = 0


def _pairs(name: str):
    """`name`'s (values, slopes) interleaved, as the compiled kernel reads them."""
    return _kernels.gelu_pairs(name)


def blockwise(x, name: str, times=None):
    """Table `name` ('phi' or 'gelu_grad') at every element of x (times `times`)."""
    return _kernels.gelu_table(x, name, times)
