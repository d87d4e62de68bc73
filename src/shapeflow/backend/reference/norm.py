"""The norm family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class NormKernels:
    """norm kernels (a mixin of ReferenceKernels)."""
