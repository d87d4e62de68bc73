"""The names of `torch.utils.data.<file>`, read from shapeflow.data when asked for."""

from __future__ import annotations

import importlib

from ..._porting_hooks import missing_attribute, torch_names_of


def file_names(module_name: str, torch_module: str, extra: tuple[str, ...] = ()):
    """(__getattr__, __dir__) for a module standing for `torch_module`: its names (and
    `extra`, names torch's file has beyond its __all__) that shapeflow.data has."""
    names = torch_names_of(torch_module) | set(extra)

    def find(name: str):
        data = importlib.import_module("shapeflow.data")
        return getattr(data, name) if name in names and hasattr(data, name) else None

    def __getattr__(name: str):
        if name == "__all__":
            return sorted(n for n in names if find(n) is not None)
        found = find(name)
        if found is None:
            raise missing_attribute(f"module {module_name!r}", torch_module, name)
        return found

    def __dir__() -> list[str]:
        return sorted(set(__getattr__("__all__")) | {"__doc__", "__name__", "__file__"})

    return __getattr__, __dir__
