"""The cpu device's kernel table: the whole MKL -> compiled C -> NumPy ladder, in one module.

Each kernel here tries the fastest path that applies (MKL's products, then the compiled C of
this folder, then NumPy through the portable kernels of `backend/reference/`) and counts
which one ran in `self.stats` ({(kernel, path): calls}), shown by `kernel_stats()` here,
`sf.backends.cpu.kernel_stats()` and `shapeflow --version --verbose`. Ops never choose a path:
they call `x.device.kernels.<kernel>(...)` and get a result, whichever path gave it.
"""

from __future__ import annotations

import numpy as np

from ..reference import ReferenceKernels


class CpuKernels(ReferenceKernels):
    """The host's kernels on NumPy arrays, each trying MKL, then compiled C, then NumPy."""

    path = "numpy"  # the portable kernels, run on NumPy, are this table's last rung

    def __init__(self) -> None:
        super().__init__(np, "cpu")

    # ---- elementwise: casts, bf16 arithmetic, gelu, interpolation ----------------------

    # ---- matmul: products, batched and accumulating ------------------------------------

    # ---- norm: layer, batch, instance, group, rms ----------------------------------------

    # ---- softmax -------------------------------------------------------------------------

    # ---- loss: cross entropy and friends -------------------------------------------------

    # ---- conv: im2col, col2im, winograd, pools -------------------------------------------

    # ---- attention: flash blocks ---------------------------------------------------------

    # ---- rnn: cells -----------------------------------------------------------------------

    # ---- optim: updates, in-place accumulation -------------------------------------------


table = CpuKernels()


def kernel_stats() -> dict[tuple[str, str], int]:
    """{(kernel, path): calls} since the start or the last reset, path one of 'mkl',
    'compiled', 'numpy'."""
    return dict(table.stats)


def reset_kernel_stats() -> None:
    table.stats.clear()

__all__ = ["CpuKernels", "kernel_stats", "reset_kernel_stats", "table"]
