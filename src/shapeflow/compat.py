"""Porting from PyTorch: `check_module` lists the lines of a program still using torch, and
those that will fail on shapeflow (a name it lacks, `.cuda()`, an import that does not exist).

`python -m shapeflow.compat train.py` prints those lines (exit status 1 if any). A name
PyTorch has and shapeflow lacks raises an AttributeError that says what to use (`ADVICE`),
and a torch tensor given to a shapeflow op raises a DTypeError naming both types
(`is_torch_tensor`): shapeflow._porting and shapeflow.torch_interop, imported at start-up.
"""

from __future__ import annotations

import functools
import sys
from collections import namedtuple

from ._porting import ADVICE, missing_attribute, torch_names_source
from .torch_interop import is_torch_tensor

__all__ = ["ADVICE", "TorchUse", "check_module", "is_torch_tensor", "main",
           "missing_attribute"]

# ---- leftover torch in a ported program -------------------------------------------------------

_TORCH_PACKAGES = ("torch", "torchvision", "torchaudio", "torchtext", "functorch")
_EINOPS_TORCH = {"einops.layers.torch": "use shapeflow.nn.Rearrange / Reduce"}
# torch modules whose shapeflow spelling is not torch -> shapeflow alone (the first that imports)
_RENAMED = {"torch.utils.data": ("shapeflow.utils.data", "shapeflow.data")}
# what a ported line must do now, where the run-time error's advice (ADVICE) is not enough
_FIX: dict[str, str] = {}
_CUDA = ("shapeflow has no cuda device: use .to(device), with device = \"cuda\" if "
         "torch.cuda.is_available() else \"cpu\" (sf.cuda.is_available() is False)")


class TorchUse(namedtuple("TorchUse", ["path", "line", "text", "what"])):
    """One line of a program that still uses PyTorch: path, line number, its text, why."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text.strip()}  ({self.what})"


def _is_torch(module: str | None) -> bool:
    if not module:
        return False
    return module.split(".")[0] in _TORCH_PACKAGES or module in _EINOPS_TORCH


@functools.cache
def _importable(module: str) -> bool:
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _spelling(torch_module: str) -> str | None:
    """The shapeflow module to import for a torch one (`torch.utils.data.dataloader` ->
    `shapeflow.utils.data.dataloader` where it exists, else `shapeflow.data.dataloader`)."""
    if not torch_module.startswith("torch"):
        return None
    candidates = ["shapeflow" + torch_module[len("torch"):]]
    for old, news in _RENAMED.items():
        if torch_module == old or torch_module.startswith(old + "."):
            candidates += [new + torch_module[len(old):] for new in news]
    return next((c for c in dict.fromkeys(candidates) if _importable(c)), None)


def _torch_import_advice(module: str) -> str:
    spelling = _spelling(module) if module.split(".")[0] == "torch" else None
    if spelling is None:
        return _EINOPS_TORCH.get(module, "")
    return "use import shapeflow as torch" if spelling == "shapeflow" else f"use {spelling}"


@functools.cache
def _missing(chain: tuple) -> str | None:
    """Why `shapeflow.a.b...` fails, or None where every name exists (a submodule is imported
    as `import shapeflow.a.b` would)."""
    import importlib

    obj = importlib.import_module("shapeflow")
    for i, name in enumerate(chain[1:], 1):
        module = ".".join(chain[:i + 1])
        if hasattr(obj, name):
            obj = getattr(obj, name)
        elif _importable(module):
            obj = importlib.import_module(module)
        else:
            where = ".".join(chain[:i])
            torch_prefix = "torch" + where[len("shapeflow"):]
            if _spelling(f"{torch_prefix}.{name}") is not None:
                return _no_module(module)
            torch_name = f"{torch_prefix}.{name}"
            if torch_name in _FIX:
                return f"fails: shapeflow has no {torch_name}; {_FIX[torch_name]}"
            return f"fails: {missing_attribute(where, torch_prefix, name)}"
    return None


def _no_module(module: str) -> str:
    spelling = _spelling("torch" + module[len("shapeflow"):])
    return f"fails: no module {module}" + (f"; use {spelling}" if spelling else "")


def _shapeflow_chain(node, sf_bound: dict) -> tuple | None:
    """`torch.nn.Linear` (torch bound to shapeflow) -> ["shapeflow", "nn", "Linear"]."""
    import ast

    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in sf_bound:
        return (*sf_bound[node.id].split("."), *names[::-1])
    return None


def _uses_in_source(source: str, path: str) -> list[TorchUse]:
    import ast

    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    found: list[tuple[int, str]] = []
    bound: dict[str, str] = {}  # local name -> the torch thing it stands for
    sf_bound: dict[str, str] = {}  # local name -> the shapeflow module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_torch(alias.name):
                    advice = _torch_import_advice(alias.name)
                    found.append((node.lineno, f"imports {alias.name}"
                                  + (f"; {advice}" if advice else "")))
                    local = alias.asname or alias.name.split(".")[0]
                    bound[local] = alias.name if alias.asname else local
                elif alias.name.split(".")[0] == "shapeflow":
                    if not _importable(alias.name):
                        found.append((node.lineno, _no_module(alias.name)))
                        continue
                    local = alias.asname or "shapeflow"
                    sf_bound[local] = alias.name if alias.asname else "shapeflow"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_torch(node.module):
            names = ", ".join(a.name for a in node.names)
            advice = _torch_import_advice(node.module)
            found.append((node.lineno, f"imports {names} from {node.module}"
                          + (f"; {advice}" if advice else "")))
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "shapeflow":
            if not _importable(node.module):
                found.append((node.lineno, _no_module(node.module)))
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                chain = (*node.module.split("."), alias.name)
                why = _missing(chain)
                if why is not None:
                    found.append((node.lineno, why))
                else:
                    sf_bound[alias.asname or alias.name] = ".".join(chain)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            arg = node.args[0].value
            if fname in ("import_module", "__import__") and isinstance(arg, str) \
                    and _is_torch(arg):
                found.append((node.lineno, f"imports {arg} at run time"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in bound:
            found.append((node.lineno, f"uses {bound[node.id]}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "cuda":
            found.append((node.lineno, f"fails: .cuda(): {_CUDA}"))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            chain = _shapeflow_chain(node, sf_bound)
            why = _missing(chain) if chain else None
            if why is not None:
                found.append((node.lineno, why))
    uses, seen = [], set()
    for lineno, what in sorted(found):
        if lineno in seen:
            continue  # one report per line: its first reason
        seen.add(lineno)
        uses.append(TorchUse(path, lineno, lines[lineno - 1] if lineno <= len(lines) else "",
                             what))
    return uses


def _files(target) -> list:
    from pathlib import Path

    if hasattr(target, "__file__") or hasattr(target, "__path__"):  # a module or package
        paths = getattr(target, "__path__", None)
        if paths:
            return sorted(p for d in paths for p in Path(d).rglob("*.py"))
        if not getattr(target, "__file__", None):
            raise ValueError(f"check_module: module {target.__name__!r} has no source file")
        return [Path(target.__file__)]
    path = Path(target)
    if path.is_dir():
        return sorted(path.rglob("*.py"))
    if not path.exists():
        raise FileNotFoundError(f"check_module: no such file or directory: {str(path)!r}")
    return [path]


def check_module(module_or_path, *, verbose: bool = True) -> list[TorchUse]:
    """The lines of a module, package, file or directory that still use PyTorch.

    Finds `import torch`, `from torch... import`, torchvision and kin, einops' torch layers,
    run-time imports of them, and every line that uses a name those imports bound; and lines
    that will fail on shapeflow: a name it lacks (`torch.jit` with torch bound to
    shapeflow), `.cuda()`, a shapeflow import path that does not exist. With `verbose`, prints
    them as `path:line: code  (why)`. An empty list: nothing left.
    """
    uses: list[TorchUse] = []
    for path in _files(module_or_path):
        uses += _uses_in_source(path.read_text(encoding="utf-8"), str(path))
    if verbose:
        for use in uses:
            print(use)
        if not uses:
            print("no PyTorch left")
    return uses


def main(argv: list[str] | None = None) -> int:
    """`python -m shapeflow.compat FILE_OR_DIR...`: print leftover torch uses and lines that will
    fail on shapeflow; 1 if any."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--torch-names"]:
        print(torch_names_source(), end="")
        return 0
    if not argv:
        print("usage: python -m shapeflow.compat FILE_OR_DIR... (lists lines still using "
              "torch)", file=sys.stderr)
        return 2
    found = [u for target in argv for u in check_module(target, verbose=False)]
    for use in found:
        print(use)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
