"""Discrete Fourier transforms (the primitives under `shapeflow.fft`)."""

from __future__ import annotations

from . import fourier, transforms  # noqa: F401  (the primitives, and sf.fft's functions)
