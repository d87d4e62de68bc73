"""The portable kernel table: every kernel an op calls, written against an array namespace.

`ReferenceKernels(xp)` runs on any namespace with NumPy's API (NumPy itself, a test device's
wrapper, CuPy): it is what a new device gets before it has fast kernels of its own, and what
the cpu table (`backend/cpu/ladder.py`) falls back to when MKL and the compiled C decline.
Each family's kernels are one mixin in this package. Every kernel takes `out=`: given a
buffer of the result's shape and dtype it writes there and returns it, so a caller that
planned the memory runs with no allocation.
"""

from __future__ import annotations

from .attention import AttentionKernels
from .base import KernelTableBase
from .conv import ConvKernels
from .elementwise import ElementwiseKernels
from .loss import LossKernels
from .matmul import MatmulKernels
from .norm import NormKernels
from .optim import OptimKernels
from .rnn import RnnKernels
from .softmax import SoftmaxKernels


class ReferenceKernels(ElementwiseKernels, MatmulKernels, NormKernels, SoftmaxKernels,
                       LossKernels, ConvKernels, AttentionKernels, RnnKernels, OptimKernels,
                       KernelTableBase):
    """All kernel families on the namespace `xp`; one instance per device."""


__all__ = ["KernelTableBase", "ReferenceKernels"]
