"""Checks the losses share: the reduction argument (and PyTorch's legacy size_average /
reduce pair), operand shapes, and the reduction itself."""

from __future__ import annotations

from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ShapeError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _check_pair(op: str, input: Tensor, target: Tensor) -> None:
    """Regression losses need input and target of one shape (shapeflow does not broadcast)."""
    ops = [("input", describe(input)), ("target", describe(target))]
    si, st = tuple(input.shape), tuple(target.shape)
    if len(si) == len(st) and all(dims_equal(a, b) for a, b in zip(si, st)):
        if not input.dtype.is_floating_point or not target.dtype.is_floating_point:
            bad = "input" if not input.dtype.is_floating_point else "target"
            raise DTypeError(f"{op}: {bad} must be floating point, got "
                             f"{(input if bad == 'input' else target).dtype}", op=op,
                             operands=ops, hint=f"use {bad}.float()")
        return
    hint = "input and target must have the same shape (PyTorch would broadcast them, " \
        "which is rarely what a loss means)"
    unit = _unit_dim(si, st)
    if unit is not None:
        d = unit
        hint = (f"input {format_shape(si)} and target {format_shape(st)} differ by a unit "
                f"dim: use target.unsqueeze({d}) or input.squeeze({d})")
    else:
        unit = _unit_dim(st, si)
        if unit is not None:
            d = unit
            hint = (f"input {format_shape(si)} and target {format_shape(st)} differ by a unit "
                    f"dim: use target.squeeze({d}) or input.unsqueeze({d})")
    raise ShapeRuntimeError(f"{op}: input {format_shape(si)} and target {format_shape(st)} have "
                            "different shapes", op=op, operands=ops, hint=hint)


def _unit_dim(longer, shorter):
    """The dim d where longer == shorter with a size-1 dim inserted at d, else None."""
    if len(longer) != len(shorter) + 1:
        return None
    for d in range(len(longer)):
        if longer[d] == 1 and longer[:d] + longer[d + 1:] == shorter:
            return d
    return None


def _reduction(op: str, size_average, reduce, reduction: str, allowed=("none", "mean", "sum")):
    """PyTorch's legacy size_average/reduce pair overrides reduction when either is given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
    if reduction not in allowed:
        raise ShapeError(f"{op}: reduction must be one of {', '.join(map(repr, allowed))}, "
                         f"got {reduction!r}", op=op)
    return reduction


def _check_same(op: str, names, *ts: Tensor) -> None:
    """Operands a loss combines elementwise must have one shape (shapeflow does not broadcast)."""
    shapes = [tuple(t.shape) for t in ts]
    if any(s != shapes[0] for s in shapes[1:]):
        listed = ", ".join(f"{n} {format_shape(s)}" for n, s in zip(names, shapes))
        raise ShapeRuntimeError(f"{op}: {listed} must have the same shape", op=op,
                                operands=[(n, describe(t)) for n, t in zip(names, ts)])


def _check_targets(op: str, input: Tensor, target: Tensor, expect: tuple) -> None:
    if tuple(target.shape) != tuple(expect):
        raise ShapeRuntimeError(f"{op}: target {format_shape(target.shape)} must have shape "
                                f"{format_shape(expect)} for input {format_shape(input.shape)}",
                                op=op, operands=[("input", describe(input)),
                                                 ("target", describe(target))])
