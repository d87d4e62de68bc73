"""The rnn family's portable kernels, written against `self.xp`."""

from __future__ import annotations


class RnnKernels:
    """rnn kernels (a mixin of ReferenceKernels)."""
