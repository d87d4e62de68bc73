"""`torch.utils`'s names that programs import: `shapeflow.utils.data`, `.checkpoint`."""

from __future__ import annotations

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
