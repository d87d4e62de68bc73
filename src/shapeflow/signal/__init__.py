"""`shapeflow.signal` (torch.signal): window functions for spectral analysis, in `windows`."""

from __future__ import annotations

from . import windows

__all__ = ["windows"]
