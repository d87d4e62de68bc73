"""Ops declared once: `@public(...)` on an op function names it in sf, on Tensor, in F and
in shapeflow.linalg; `__init__.py`, `_methods.py`, `nn/functional.py` and `linalg.py` read it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

# where a public op may be exported: sf.<name>, Tensor.<name>, F.<name>, shapeflow.linalg.<name>
NAMESPACES = ("sf", "method", "functional", "linalg")

# the packages and modules under ops/ whose functions declare themselves (imported before the
# table is read, so that every decorator has run)
FAMILIES = ("elementwise", "activation", "reduce", "movement", "linalg", "nn", "index",
            "sorting", "sampling", "loss", "norm", "conv", "spectral")

Names = bool | str | tuple[str, ...]


class Export:
    """One public op function and the names it has in each namespace (a plain class: a
    dataclass would cost a millisecond of `import shapeflow`)."""

    __slots__ = ("fn", "sf", "method", "functional", "linalg")

    def __init__(self, fn: Callable, sf: tuple[str, ...], method: tuple[str, ...],
                 functional: tuple[str, ...], linalg: tuple[str, ...]) -> None:
        self.fn, self.sf, self.method = fn, sf, method
        self.functional, self.linalg = functional, linalg

    def names(self, namespace: str) -> tuple[str, ...]:
        return getattr(self, namespace)

    @property
    def module(self) -> str:
        return self.fn.__module__


EXPORTS: list[Export] = []  # in declaration order (import order of the op modules)


def _names(value: Names, fn: Callable) -> tuple[str, ...]:
    if value is True:
        return (fn.__name__,)
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def public(sf: Names = True, method: Names = False, functional: Names = False,
           linalg: Names = False) -> Callable[[Callable], Callable]:
    """Declare an op function public: True exports it under its own name, a string (or a
    tuple of them) under that name, False not at all. Returns the function unchanged (a call
    costs what it did); the table is read at import only.

        @public(method=True)                     # sf.exp and t.exp()
        @public(sf=False, method=True)           # t.index_add_() only
        @public(functional=True)                 # sf.softmin and F.softmin
        @public(sf=False, linalg="vector_norm")  # shapeflow.linalg.vector_norm only
        multiply = public(sf="multiply", method="multiply")(mul)  # an alias, declared as one
    """

    def declare(fn: Callable) -> Callable:
        EXPORTS.append(Export(fn, _names(sf, fn), _names(method, fn), _names(functional, fn),
                              _names(linalg, fn)))
        return fn

    return declare


def load() -> list[Export]:
    """Every declaration: imports each ops family first, so that its decorators have run."""
    for family in FAMILIES:
        importlib.import_module(f"{__package__}.{family}")
    return EXPORTS


def namespace(name: str) -> dict[str, Callable]:
    """{public name: function} for one namespace ("sf", "method", "functional", "linalg").
    Two functions declaring the same name there is an error: one would silently win."""
    assert name in NAMESPACES, name
    table: dict[str, Callable] = {}
    for export in load():
        for public_name in export.names(name):
            other = table.setdefault(public_name, export.fn)
            if other is not export.fn:
                raise RuntimeError(f"{name}.{public_name} is declared twice: by "
                                   f"{other.__module__}.{other.__qualname__} and by "
                                   f"{export.module}.{export.fn.__qualname__}")
    return table


def declared_in(module: str) -> list[str]:
    """The public names (`sf.x`, `Tensor.x`, `F.x`, `linalg.x`) a module's functions declare."""
    prefix = {"sf": "sf", "method": "Tensor", "functional": "F", "linalg": "linalg"}
    return [f"{prefix[ns]}.{n}" for e in load() if e.module == module for ns in NAMESPACES
            for n in e.names(ns)]
