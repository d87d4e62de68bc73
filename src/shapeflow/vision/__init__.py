"""torchvision's counterpart: `import shapeflow.vision as torchvision` (transforms, datasets,
models, utils, io), on PIL images and shapeflow tensors; Pillow is its one extra dependency."""

from __future__ import annotations

import importlib

from . import datasets, io, transforms, utils

__all__ = ["datasets", "io", "models", "transforms", "utils"]


def __getattr__(name: str):
    # models are nn Modules written apart from the rest: imported on first use
    if name == "models":
        return importlib.import_module(".models", __name__)
    raise AttributeError(f"module 'shapeflow.vision' has no attribute {name!r}")
