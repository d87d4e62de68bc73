"""`torch.utils.data._utils`: the path of `_utils.collate.default_collate`."""

from __future__ import annotations

from . import collate

__all__ = ["collate"]
