"""Mixed precision, as `torch.amp`: `autocast` regions and the `GradScaler` for float16."""

from __future__ import annotations

from ..device import CpuDevice
from . import cpu as _cpu
from .autocast_mode import autocast, is_autocast_available

CpuDevice.amp = _cpu  # sf.cpu.amp, as torch.cpu.amp

__all__ = ["GradScaler", "autocast", "is_autocast_available"]


def __getattr__(name: str):
    if name == "GradScaler":  # imported when first used: `import shapeflow` stays quick
        from .grad_scaler import GradScaler

        return GradScaler
    raise AttributeError(f"module 'shapeflow.amp' has no attribute {name!r}")
