"""Other libraries that learn of shapeflow tensors: each is told when it is imported.

Importing shapeflow imports none of them. `install()` registers shapeflow with any that is
already imported and, for the rest, watches the import system for the module that defines
its hook (for einops, `einops._backends`), registering right after that module runs.
"""

from __future__ import annotations

import importlib
import sys

# module that must exist first -> shapeflow module whose import registers shapeflow there
HOOKS = {"einops._backends": "shapeflow.ext.einops_backend"}


class _Loader:
    """Runs the real loader, then imports the registering module (importlib.abc's protocol,
    without importing importlib.abc: 40 ms)."""

    def __init__(self, loader, then: str) -> None:
        self.loader, self.then = loader, then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        importlib.import_module(self.then)

    def __getattr__(self, name: str):  # get_source, get_filename...: the real loader's
        return getattr(self.loader, name)


class _Watcher:
    """On sys.meta_path: finds HOOKS' modules with the other finders and wraps their loader."""

    def find_spec(self, fullname: str, path, target=None):
        then = HOOKS.get(fullname)
        if then is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, then)
                return spec
        return None


_watcher = _Watcher()


def install() -> None:
    """Register with the libraries already imported; watch for the others."""
    for name, then in HOOKS.items():
        if name in sys.modules:
            importlib.import_module(then)
    if _watcher not in sys.meta_path:
        sys.meta_path.insert(0, _watcher)
