"""`sf.accelerator`: PyTorch's device-neutral accelerator questions; shapeflow has none."""

from __future__ import annotations

__all__ = ["current_accelerator", "device_count", "is_available", "synchronize"]


def is_available() -> bool:
    """False: cpu and meta are shapeflow's devices, neither an accelerator."""
    return False


def current_accelerator(check_available: bool = False) -> None:
    """None: no accelerator (as torch.accelerator.current_accelerator on a CPU machine)."""
    return None


def device_count() -> int:
    return 0


def synchronize(device=None) -> None:
    """No accelerator work is ever pending."""


def __getattr__(name: str):
    from ._porting import missing_attribute

    raise missing_attribute("module 'shapeflow.accelerator'", "torch.accelerator", name)
