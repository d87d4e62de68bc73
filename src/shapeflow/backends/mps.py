"""`torch.backends.mps`: shapeflow has no mps device."""

from __future__ import annotations


def is_available() -> bool:
    """False: shapeflow has no mps device."""
    return False


def is_built() -> bool:
    """False: shapeflow is not built for mps."""
    return False
