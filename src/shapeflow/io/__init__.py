"""Reading and writing: checkpoints (`save` / `load`, safetensors), GGUF for llama.cpp
(`export_gguf`)."""

from __future__ import annotations

from .checkpoint import load, save
from .gguf import export_gguf

__all__ = ["load", "save", "export_gguf"]
