"""`torch.serialization`'s names: save/load and the allowlist of weights-only loads."""

from __future__ import annotations

from .io.checkpoint import load, save
from .io.pickled import (
    WeightsOnlyError,
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    safe_globals,
)

DEFAULT_PROTOCOL = 2  # the pickle protocol torch.save writes (and sf.save, for zip files)

__all__ = ["DEFAULT_PROTOCOL", "WeightsOnlyError", "add_safe_globals", "clear_safe_globals",
           "get_safe_globals", "load", "safe_globals", "save"]
