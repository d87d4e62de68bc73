"""The attention family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class AttentionKernels:
    """attention kernels (a mixin of ReferenceKernels)."""
