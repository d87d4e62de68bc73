"""The matmul family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class MatmulKernels:
    """matmul kernels (a mixin of ReferenceKernels)."""
