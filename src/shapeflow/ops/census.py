"""The census of primitives: every Op class, its family, what backward keeps, what it calls.

Defining an Op subclass with its own `name` registers it (`base.PRIMITIVES`); this module
reads that registry. The saved set and the kernels are read from each class's source (the
`saved` method's Saved declarations, the `kernels.<name>(` calls of the class and its
bases), so the census describes the code as written, with no input needed; the dtype
promotion kind is the class's `promotion` (dtypes.Promotion), where it declares one.
`shapeflow ops` prints it.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass

from . import registry
from .base import INPUT, OUTPUT, PRIMITIVES, Op, Saved

_KERNEL_ALIAS = re.compile(r"^\s*(\w+) = [\w.]*\bkernels$", re.MULTILINE)  # k = dev.kernels
_NAMES_ITSELF = re.compile(r"\bself\.name\b[^=\n]*=")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_SAVED_CALL = re.compile(r"Saved\.(input|output)\(\s*(\d*)|Saved\.new\(\s*[\"'](\w+)")


@dataclass(frozen=True)
class Primitive:
    """One registered primitive, as the census lists it."""

    name: str          # the op's name (errors, graphs, memory reports)
    qualname: str      # module.Class
    family: str        # the concept folder under ops/ (or the module outside ops)
    differentiable: bool
    saved: tuple[str, ...]    # what `saved` may declare: x0, x1, out, or an intermediate
    kernels: tuple[str, ...]  # the kernel-table entries its code calls (kernels.x(, or
    #                           through a local alias: k = self.device.kernels; k.x()
    promotion: str | None = None  # its dtype promotion kind (INT_TO_FLOAT...), if declared
    public: tuple[str, ...] = ()  # the public names its module's functions declare
    #                               (ops/registry.py): sf.add, Tensor.add, F.gelu, linalg.inv


# a concept folder whose family goes by another name: linear algebra's primitives (matmul,
# the factorizations) are the census's `matrix` family (`shapeflow ops --family matrix`);
# the layers' concepts with folders of their own (activations, losses, norms) stay in the
# `nn` family with linear, softmax and attention (`shapeflow ops --family nn`)
_FAMILY_OF_FOLDER = {"linalg": "matrix", "activation": "nn", "loss": "nn", "norm": "nn"}


def family_of(cls: type) -> str:
    """`elementwise` for ops/elementwise/binary.py, `matrix` for ops/linalg/matmul.py;
    outside ops the module's path (`autograd.function`)."""
    package, _, rest = cls.__module__.partition(".")
    if package != "shapeflow":  # an op a user (or a test) defined
        return cls.__module__
    parts = rest.split(".")
    if parts[0] == "ops":
        return _FAMILY_OF_FOLDER.get(parts[1], parts[1]) if len(parts) > 1 else "ops"
    return rest


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _describe(entry: Saved) -> str:
    return {INPUT: f"x{entry.index}", OUTPUT: "out"}.get(entry.source, entry.name)


def _saved(cls: type) -> tuple[str, ...]:
    """What `saved` may declare: module-level Saved constants (X0, prebuilt tuples) it names,
    and the Saved.input / output / new calls in its body."""
    if cls.saved is Op.saved:
        return ()
    source = _source(cls.saved)
    # the names `saved` reads are its own module's (a base in another file: RMSNorm's _Norm)
    module = vars(sys.modules[cls.saved.__module__])
    found = []
    for word in dict.fromkeys(_WORD.findall(source)):
        value = module.get(word)
        entries = (value,) if isinstance(value, Saved) else value if isinstance(
            value, tuple) and value and all(isinstance(e, Saved) for e in value) else ()
        found += [_describe(e) for e in entries]
    for kind, index, new in _SAVED_CALL.findall(source):
        found.append(new if new else f"x{index}" if kind == "input" and index else
                     "out" if kind == "output" else "input")
    return tuple(dict.fromkeys(found)) or ("declared",)


def _kernels(cls: type) -> tuple[str, ...]:
    names = []
    for klass in cls.__mro__:
        if klass is Op or not issubclass(klass, Op):
            break
        source = _source(klass)
        tables = "|".join({"kernels", *_KERNEL_ALIAS.findall(source)})
        for name in re.findall(rf"\b(?:{tables})\.(\w+)\(", source):
            if name not in names:
                names.append(name)
    return tuple(sorted(names))


def is_primitive(cls: type) -> bool:
    """A class ops apply: one with a name of its own, or one nothing builds on (a class
    with neither is a base its subclasses share: Binary, Unary, Reduction...)."""
    return "name" in cls.__dict__ or not cls.__subclasses__()


def named(cls: type) -> bool:
    """Whether the op has a name of its own or a base's, or names each instance in
    `__init__` (`self.name = ...`), instead of Op's placeholder 'op'."""
    return cls.name != Op.name or any(
        _NAMES_ITSELF.search(_source(vars(k).get("__init__"))) for k in cls.__mro__
        if k is not Op and issubclass(k, Op))


def _promotion(cls: type) -> str | None:
    kind = getattr(cls, "promotion", None)
    return kind.name if kind is not None else None


def census() -> list[Primitive]:
    """Every primitive of shapeflow, by family and name (ops defined elsewhere are registered
    too, and left out)."""
    rows = [Primitive(cls.name, qual, family_of(cls), bool(cls.differentiable), _saved(cls),
                      _kernels(cls), _promotion(cls), tuple(registry.declared_in(cls.__module__)))
            for qual, cls in PRIMITIVES.items()
            if qual.startswith("shapeflow.") and is_primitive(cls)]
    return sorted(rows, key=lambda r: (r.family, r.name, r.qualname))


def format_census(rows: list[Primitive]) -> str:
    """The census as a table: family, name, backward, saved, promotion kind, how many public
    names its module declares, kernels."""
    lines = [f"{'family':<14} {'name':<34} {'grad':<5} {'saved':<22} {'promotion':<16} "
             f"{'public':<6} kernels"]
    for r in rows:
        lines.append(f"{r.family:<14} {r.name:<34} {'yes' if r.differentiable else 'no':<5} "
                     f"{','.join(r.saved) or '-':<22} {r.promotion or '-':<16} "
                     f"{len(r.public):<6} {','.join(r.kernels) or '-'}")
    families = sorted({r.family for r in rows})
    lines.append(f"{len(rows)} primitives in {len(families)} families")
    return "\n".join(lines)
