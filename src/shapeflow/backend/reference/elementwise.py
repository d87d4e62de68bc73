"""The elementwise family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class ElementwiseKernels:
    """elementwise kernels (a mixin of ReferenceKernels)."""
