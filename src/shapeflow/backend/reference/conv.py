"""The conv family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class ConvKernels:
    """conv kernels (a mixin of ReferenceKernels)."""
