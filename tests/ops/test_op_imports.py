"""Ops compute through their device: no module under ops/ imports NumPy or the backend.

An op reaches arrays through `x.device.xp` (the array namespace) and kernels through
`x.device.kernels` (the kernel table); importing NumPy or `backend` there would tie the op
to the cpu device (tests/core/test_strict_device.py shows what that breaks).
"""

from __future__ import annotations

import ast
from pathlib import Path

OPS = Path(__file__).resolve().parents[2] / "src" / "shapeflow" / "ops"
FORBIDDEN = ("numpy", "ml_dtypes", "scipy")


def _imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolve against the file's package
                package = path.relative_to(OPS.parent.parent).parent.parts
                base = list(package[:len(package) - node.level + 1])
                module = ".".join(base + ([module] if module else []))
            yield node.lineno, module


def test_no_op_module_imports_numpy_or_the_backend():
    found = []
    for path in sorted(OPS.rglob("*.py")):
        for line, module in _imports(path):
            top = module.split(".")[0]
            if top in FORBIDDEN or module.startswith("shapeflow.backend"):
                found.append(f"{path.relative_to(OPS.parent)}:{line} imports {module}")
    assert not found, "\n".join(found)
