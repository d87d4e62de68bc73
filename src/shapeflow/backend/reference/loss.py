"""The loss family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class LossKernels:
    """loss kernels (a mixin of ReferenceKernels)."""
