"""Discrete Fourier transforms: the primitives under `shapeflow.fft`, and stft / istft."""

from __future__ import annotations

from . import fourier, short_time, transforms  # noqa: F401  (primitives, sf.fft, stft)
