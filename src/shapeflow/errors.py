"""shapeflow's error classes: one base and the four kinds a user must tell apart.

Each kind has small concrete subclasses that are also the builtin PyTorch raises in that
situation, so a ported `except IndexError` / `except RuntimeError` still catches them:
a dim or index out of range is a `ShapeIndexError` (IndexError), sizes that do not fit are
a `ShapeRuntimeError` (RuntimeError); a plain `ShapeError` stays a ValueError, for the
places where PyTorch raises ValueError.
"""

from __future__ import annotations

from typing import Any


class ShapeflowError(Exception):
    """Base of every error shapeflow raises on purpose.

    Carries where the error happened (`op`, `module_path`), what it was given
    (`operands`: one line per operand), the shape chain up to it, and a hint.
    """

    kind = "ShapeflowError"

    def __init__(
        self,
        message: str,
        *,
        op: str | None = None,
        operands: list[tuple[str, Any]] | None = None,
        hint: str | None = None,
        module_path: str | None = None,
        chain: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.operands = operands or []
        self.hint = hint
        self.module_path = module_path
        self.module_kind: str | None = None
        self.chain = chain
        self.user_line: str | None = None

    def __str__(self) -> str:
        head = self.message
        if self.module_path:
            where = self.module_path
            if self.module_kind:
                where += f" ({self.module_kind})"
            head += f" in {where}"
        lines = [head]
        width = max([len(name) for name, _ in self.operands] + [6])
        for name, desc in self.operands:
            lines.append(f"  {name:<{width}} : {desc}")
        if self.chain:
            lines.append(f"  {'chain':<{width}} : {self.chain}")
        if self.user_line:
            lines.append(f"  {'at':<{width}} : {self.user_line}")
        if self.hint:
            lines.append(f"  {'hint':<{width}} : {self.hint}")
        return "\n".join(lines)

    def __reduce__(self):  # keep the fields when pickled (e.g. by pytest-xdist)
        return (_rebuild, (type(self), self.message, self.__dict__))


def _rebuild(cls, message, state):
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class ShapeError(ShapeflowError, ValueError):
    """A shape contract broke: sizes that do not fit an op or module."""

    kind = "ShapeError"


class ShapeIndexError(ShapeError, IndexError):
    """A dim or an index out of range (PyTorch raises IndexError)."""


class ShapeRuntimeError(ShapeError, RuntimeError):
    """Sizes that do not fit an op: a mismatch PyTorch reports as RuntimeError."""


class DTypeError(ShapeflowError, TypeError):
    """A dtype does not fit an op (an integer tensor into Linear, float targets...)."""

    kind = "DTypeError"


class DTypeRuntimeError(DTypeError, RuntimeError):
    """A dtype PyTorch rejects with RuntimeError (integers to negative integer powers...)."""


class DTypeNotImplementedError(DTypeRuntimeError, NotImplementedError):
    """An op PyTorch has no kernel for in this dtype (`&` on floats: NotImplementedError)."""


class IntegerDivisionError(ShapeflowError, RuntimeError, ZeroDivisionError):
    """Integer division or remainder by zero (PyTorch raises RuntimeError)."""

    kind = "IntegerDivisionError"


class DeviceError(ShapeflowError, RuntimeError):
    """Operands on different devices, or data asked of a meta tensor."""

    kind = "DeviceError"


class GraphError(ShapeflowError, RuntimeError):
    """The computation graph cannot carry gradients: freed, broken, or modified in place."""

    kind = "GraphError"


class ArgumentError(ShapeflowError, RuntimeError):
    """An argument value PyTorch rejects with RuntimeError (a rounding mode, celu's alpha=0)."""


class ArgumentValueError(ShapeflowError, ValueError):
    """An argument value PyTorch rejects with ValueError (a module option out of range)."""


class CheckpointError(ShapeflowError, OSError):
    """A checkpoint file is missing, truncated, corrupted or of another format."""

    kind = "CheckpointError"


class ExportError(ShapeflowError, RuntimeError):
    """An export (ONNX) met something it cannot express."""

    kind = "ExportError"
