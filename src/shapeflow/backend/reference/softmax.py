"""The softmax family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class SoftmaxKernels:
    """softmax kernels (a mixin of ReferenceKernels)."""
