"""The optim family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class OptimKernels:
    """optim kernels (a mixin of ReferenceKernels)."""
