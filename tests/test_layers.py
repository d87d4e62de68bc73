"""shapeflow's layers import downward only, and no imports go in a circle.

Every import in src/shapeflow is read with `ast`: module-level and inside functions,
absolute and relative; `if TYPE_CHECKING:` blocks are skipped. Three rules: no import names
a module of a higher layer than its own (LAYERS, docs/design.md "Layers"); module-level
imports make no circle (counting the packages an import runs first); and the table's parts
(`ops`, `nn`, `tensor`, ...) import each other in no circle, imports in functions counted.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "shapeflow"

# Lowest first. A module belongs to the longest prefix that names it (its path inside
# shapeflow, dotted: `ops` is ops/ and everything in it, `inspect.trace` that one file,
# "" the package's own __init__). It may import its own layer and the layers before it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("value types", ("errors", "torch_interop", "dtypes", "symbolic", "shape",
                     "random", "_porting_hooks", "_torch_names")),
    ("backend", ("backend",)),  # kernel tables: cpu (NumPy, MKL, C), reference, null (meta)
    ("device", ("device",)),  # a device owns a kernel table and an array namespace
    # import nothing: tensor.py notes graph breaks, ops record under grad mode, and the
    # engine and ops reach inspect through inspect_hooks
    ("graph state", ("autograd.grad_mode", "autograd.breaks", "autograd.inspect_hooks",
                     "autograd.autocast_state")),
    ("tensor", ("tensor",)),
    ("factories", ("factories",)),
    ("autograd", ("autograd",)),  # the engine and gradcheck: nodes and Tensor methods, no op
    ("ops", ("ops",)),  # ops make Tensors and record nodes (ops/base.py imports autograd)
    ("methods, checkpointing", ("_methods", "tensor_compat", "recompute", "linalg",  # run ops
                                "special", "signal", "fft", "autograd.function",
                                "autograd.functional", "dlpack")),
    # Module.__call__ runs through inspect/trace.py (module paths and shape chains for
    # every error), so that file is nn's, though it lives in inspect/
    ("nn, optim, data", ("nn", "optim", "data", "inspect.trace", "distributed", "utils",
                         "amp", "distributions")),
    ("distributed optimizers", ("distributed.optim",)),  # above both optim and distributed
    ("inspect", ("inspect",)),
    # sf.compile traces on meta and plans memory (inspect's units), above nn and optim
    ("compiler", ("compiler",)),
    # what porting from PyTorch meets: torch's names and device questions, einops' backend
    ("porting", ("_porting", "compat", "cuda", "backends", "accelerator",
                 "ext")),
    # quant's modules are nn Modules, its checkpoints go through io, and its report
    # (quant.report) reads inspect: it sits with io
    # serving runs models and loads their checkpoints; the cli starts it
    ("models, io, cli", ("models", "io", "cli", "__main__", "_docs", "quant", "onnx",
                         "serialization", "serve", "")),
    # torchvision's counterpart: transforms and datasets on data, models on nn
    ("vision", ("vision",)),
)


@dataclass(frozen=True)
class Import:
    """One import statement's edge: which module imports which, where, and when."""

    source: str  # importing module, dotted inside shapeflow ("ops.base"; "" is the package)
    target: str  # the module it names (a name that is no module resolves to its package)
    file: str
    line: int
    lazy: bool  # inside a function: runs when called, not at import

    def where(self) -> str:
        return f"{self.file}:{self.line}{' (in a function)' if self.lazy else ''}"


def modules(src: Path = SRC, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of the package, by dotted name inside it ("" for its __init__)."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src / package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _shown(path: Path, src: Path) -> str:
    """How messages name a file: from the repository root for shapeflow's own."""
    return str(path.relative_to(src.parent if src == SRC else src))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


class _Scan:
    """The imports of one file, each resolved to a module of the package."""

    def __init__(self, name: str, path: Path, file: str, mods: dict, package: str) -> None:
        self.name, self.file, self.mods, self.package = name, file, mods, package
        self.here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self.found: list[Import] = []
        self.visit(ast.parse(path.read_text(), str(path)), lazy=False)

    def resolve(self, name: str) -> str:
        while name not in self.mods:  # `from ..models import GPT`: the package
            name = name.rpartition(".")[0]
        return name

    def add(self, target: str, node: ast.stmt, lazy: bool) -> None:
        self.found.append(Import(self.name, self.resolve(target), self.file, node.lineno, lazy))

    def ours(self, module: str) -> str | None:
        """`shapeflow.ops.base` -> `ops.base`; None for another package's module."""
        if module == self.package or module.startswith(self.package + "."):
            return module[len(self.package) + 1:]
        return None

    def visit(self, node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child, lazy)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := self.ours(alias.name)) is not None:
                    self.add(target, node, lazy)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                up = self.here.split(".") if self.here else []
                up = up[:len(up) - (node.level - 1)]
                base = _join(".".join(up), node.module or "")
            else:
                base = self.ours(node.module or "")
            if base is not None:
                for alias in node.names:  # `from . import dtypes` names a module
                    sub = _join(base, alias.name)
                    self.add(sub if alias.name != "*" and sub in self.mods else base, node, lazy)
        inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            self.visit(child, inner)


@functools.cache
def imports(src: Path = SRC, package: str = PACKAGE) -> tuple[Import, ...]:
    """Every import of a package module by a package module."""
    mods = modules(src, package)
    out = []
    for name, path in mods.items():
        out += _Scan(name, path, _shown(path, src), mods, package).found
    return tuple(out)


def part_of(name: str, layers=LAYERS) -> tuple[int, str] | None:
    """(layer index, table prefix) of a module: the longest prefix that names it."""
    best = None
    for i, (_, prefixes) in enumerate(layers):
        for p in prefixes:
            if (name == p or (p and name.startswith(p + "."))) and (
                    best is None or len(p) > len(best[1])):
                best = (i, p)
    return best


def _cycles(edges: dict[str, dict[str, Import]]) -> list[list[list[str]]]:
    """Per strongly connected group of two or more nodes (Tarjan), the shortest circle
    through each of its nodes, so that every node in the group is named."""
    index, low, stack, on, groups = {}, {}, [], set(), []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(edges):
        if v not in index:
            connect(v)
    out = []
    for group in groups:
        circles, named = [], set()
        for start in sorted(group):
            if start in named:
                continue
            paths, queue = {start: [start]}, [start]
            while queue:  # breadth first: the shortest way back to start
                v = queue.pop(0)
                for w in sorted(edges.get(v, {})):
                    if w == start:
                        circles.append(paths[v] + [start])
                        named.update(paths[v])
                        queue = []
                        break
                    if w in group and w not in paths:
                        paths[w] = paths[v] + [w]
                        queue.append(w)
        out.append(circles)
    return out


def _describe(circles: list[list[str]], edges, label=lambda n: n or "shapeflow") -> str:
    names = sorted({label(n) for c in circles for n in c})
    lines = [f"  {len(names)} in the circle: {', '.join(names)}"]
    for circle in circles:
        lines.append("  " + " -> ".join(label(n) for n in circle))
        lines += [f"    {label(a)} -> {label(b)}  {edges[a][b].where()}"
                  for a, b in zip(circle, circle[1:])]
    return "\n".join(lines)


def unplaced(src: Path = SRC, package: str = PACKAGE, layers=LAYERS) -> list[str]:
    return [f"{_shown(path, src)} ({name or package}) is in no layer of LAYERS"
            for name, path in modules(src, package).items() if part_of(name, layers) is None]


def upward(src: Path = SRC, package: str = PACKAGE, layers=LAYERS) -> list[str]:
    """Imports from a lower layer to a higher one."""
    out = []
    for imp in imports(src, package):
        have, want = part_of(imp.source, layers), part_of(imp.target, layers)
        if have is not None and want is not None and want[0] > have[0]:
            out.append(f"{imp.where()}: {imp.source or package} (layer "
                       f"'{layers[have[0]][0]}') imports {imp.target or package} (layer "
                       f"'{layers[want[0]][0]}')")
    return out


def module_circles(src: Path = SRC, package: str = PACKAGE) -> list[str]:
    """Circles of module-level imports, counting the packages an import runs on the way
    (`from ..autograd import breaks` runs autograd/__init__.py first); not the package root."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports(src, package):
        if imp.lazy:
            continue
        targets, parent = [imp.target], imp.target.rpartition(".")[0]
        while parent:
            if not (imp.source == parent or imp.source.startswith(parent + ".")):
                targets.append(parent)
            parent = parent.rpartition(".")[0]
        for t in targets:
            if t != imp.source:
                edges.setdefault(imp.source, {}).setdefault(t, imp)
    return ["module-level imports in a circle:\n" + _describe(c, edges) for c in _cycles(edges)]


def part_circles(src: Path = SRC, package: str = PACKAGE, layers=LAYERS) -> list[str]:
    """Circles between the table's parts (ops, nn, tensor, ...), imports in functions counted.

    Imports inside one part (between ops families, say) are its own business."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports(src, package):
        a, b = part_of(imp.source, layers), part_of(imp.target, layers)
        if a is not None and b is not None and a[1] != b[1]:
            edges.setdefault(a[1], {}).setdefault(b[1], imp)
    return ["parts importing each other in a circle:\n" + _describe(c, edges)
            for c in _cycles(edges)]


def _fail_on(problems: list[str], what: str) -> None:
    assert not problems, f"{len(problems)} {what}:\n" + "\n".join(problems)


def test_the_scan_sees_the_package():
    names = modules()
    assert {"", "tensor", "ops.base", "autograd.engine", "nn.module"} <= set(names)
    seen = {(i.source, i.target) for i in imports()}
    assert ("ops.base", "tensor") in seen and ("", "_methods") in seen


def test_every_module_has_a_layer():
    _fail_on(unplaced(), "module(s) outside the layer table (add them to LAYERS here)")


def test_imports_go_downward_only():
    _fail_on(upward(), "import(s) from a lower layer to a higher one "
                       "(move the code, or have the upper layer install a hook)")


def test_no_circle_of_module_level_imports():
    _fail_on(module_circles(), "import circle(s)")


def test_no_circle_between_parts_counting_lazy_imports():
    _fail_on(part_circles(), "import circle(s) between parts")


# ---- the checks themselves, on a small made-up package ------------------------------------
_FAKE = {
    "__init__.py": "from . import low, high\n",
    "low/__init__.py": "from .core import thing\n",
    "low/core.py": ("from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from ..high import Upper\n"
                    "def thing():\n    from fake.high import run\n    return run\n"),
    "low/state.py": "",
    "high/__init__.py": "from .run import run\n",
    "high/run.py": "from ..low import state\nfrom . import loop\ndef run(): ...\n",
    "high/loop.py": "import fake.high.run\n",
    "stray.py": "",
}
_FAKE_LAYERS = (("low", ("low",)), ("high", ("high", "")))


def _fake(tmp_path: Path) -> Path:
    for name, text in _FAKE.items():
        (tmp_path / "fake" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "fake" / name).write_text(text)
    return tmp_path


def test_the_checks_find_what_they_should(tmp_path):
    src = _fake(tmp_path)
    found = {(i.source, i.target, i.lazy) for i in imports(src, "fake")}
    assert ("low.core", "high.run", True) in found  # absolute, in a function
    assert ("high.run", "low.state", False) in found  # relative, a module by `from`
    assert ("", "high", False) in found
    assert not any(t == "high" and s == "low.core" for s, t, _ in found)  # TYPE_CHECKING

    assert unplaced(src, "fake", _FAKE_LAYERS) == ["fake/stray.py (stray) is in no layer of "
                                                   "LAYERS"]
    up = upward(src, "fake", _FAKE_LAYERS)
    assert len(up) == 1 and up[0].startswith("fake/low/core.py:5 (in a function): low.core")

    circles = module_circles(src, "fake")
    assert len(circles) == 1 and "2 in the circle: high.loop, high.run" in circles[0]
    assert circles[0].endswith("high.run -> high.loop  fake/high/run.py:2")

    between = part_circles(src, "fake", _FAKE_LAYERS)
    assert len(between) == 1 and "low -> high  fake/low/core.py:5 (in a function)" in between[0]
