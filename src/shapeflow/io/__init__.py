"""Reading and writing: checkpoints (`save` / `load`, safetensors)."""

from __future__ import annotations

from .checkpoint import load, save

__all__ = ["load", "save"]
