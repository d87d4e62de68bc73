"""`torch.backends.cudnn`: settable flags with no effect (shapeflow has no cuDNN)."""

from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: shapeflow is not built with cuDNN."""
    return False


def version() -> None:
    """None, as torch's without cuDNN."""
    return None
