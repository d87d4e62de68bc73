"""Margin losses over class scores: multi-class hinge (multi_margin_loss), multi-label hinge
(multilabel_margin_loss) and the per-class logistic loss (multilabel_soft_margin_loss).

Composites of gather / where / sums, so gradients and the meta device come from those ops.
"""

from __future__ import annotations

from ...errors import DTypeError, ShapeIndexError, ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..activation.pointwise import logsigmoid
from ..elementwise import where
from ..registry import public
from ._common import _reduce, _reduction


def _fail(op: str, msg: str, input: Tensor, target: Tensor, hint: str | None = None):
    return ShapeRuntimeError(f"{op}: {msg}", op=op, hint=hint,
                             operands=[("input", describe(input)), ("target", describe(target))])


def _check_classes(op: str, input: Tensor, target: Tensor, n: int, low: int) -> None:
    """Class ids outside [low, n) raise (checked on the host where there is data)."""
    if target.dtype.is_floating_point or target.dtype.is_bool:
        raise DTypeError(f"{op}: target must hold integer class ids, got {target.dtype}", op=op,
                         operands=[("target", describe(target))], hint="use target.long()")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: input must be floating point, got {input.dtype}", op=op,
                         operands=[("input", describe(input))], hint="use input.float()")
    data = target._data
    if data is None or data.size == 0:
        return
    lo, hi = int(data.min()), int(data.max())
    if lo < low or hi >= n:
        bad = hi if hi >= n else lo
        raise ShapeIndexError(f"{op}: target {bad} is out of range for {n} classes", op=op,
                              operands=[("input", describe(input)), ("target", describe(target))])


def _rows(op: str, input: Tensor) -> tuple[int, int]:
    """(N, C) of a 0-d, 1-d (one sample) or 2-d input."""
    if input.ndim > 2:
        raise ShapeRuntimeError(f"{op}: input must be 0-D, 1-D or 2-D, got "
                                f"{format_shape(input.shape)}", op=op,
                                operands=[("input", describe(input))])
    if input.ndim == 2:
        return input.shape[0], input.shape[1]
    return 1, (input.shape[0] if input.ndim == 1 else 1)


@public(sf=False, functional=True)
def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average=None, reduce=None,
                      reduction: str = "mean") -> Tensor:
    """sum over i != y of w[y] max(0, margin - x[y] + x[i])^p, divided by the class count."""
    op = "multi_margin_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    if p not in (1, 2):
        raise ShapeRuntimeError(f"{op}: only p == 1 and p == 2 are supported, got {p}", op=op)
    n, c = _rows(op, input)
    if target.ndim > 1 or target.numel() != n:
        raise _fail(op, f"target {format_shape(target.shape)} must hold one class id per sample "
                    f"({n}) for input {format_shape(input.shape)}", input, target)
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
        raise ShapeRuntimeError(f"{op}: weight must be 1-D with {c} entries, got "
                                f"{format_shape(weight.shape)}", op=op,
                                operands=[("weight", describe(weight))])
    _check_classes(op, input, target, c, 0)
    x = input.reshape(n, c)
    y = target.reshape(n, 1)
    z = (margin - x.gather(1, y) + x).clamp(min=0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * weight.gather(0, y.reshape(n)).reshape(n, 1)
    from ...factories import arange

    own = arange(c, device=input.device).reshape(1, c) == y  # the target's own term is no margin
    loss = where(own, 0.0, z).sum(1) / c
    return _reduce(loss.reshape(tuple(target.shape)), reduction)


@public(sf=False, functional=True)
def multilabel_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Hinge between every target class and every other class: target lists class ids, ended
    by the first -1; sum over (target j, non-target i) of max(0, 1 - (x[j] - x[i])) / C."""
    op = "multilabel_margin_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    n, c = _rows(op, input)
    if tuple(target.shape) != tuple(input.shape):
        raise _fail(op, f"target {format_shape(target.shape)} must have input's shape "
                    f"{format_shape(input.shape)}", input, target)
    _check_classes(op, input, target, c, -1)
    x = input.reshape(n, c)
    y = target.reshape(n, c)
    listed = (y >= 0).long().cumprod(1) > 0  # ids before the first -1
    ids = where(listed, y, 0)
    from ...factories import arange

    classes = arange(c, device=input.device).reshape(1, 1, c)
    hit = (ids.unsqueeze(2) == classes) & listed.unsqueeze(2)  # [n, slot, class]
    is_target = hit.any(1)  # [n, class]
    hinge = (1.0 - x.gather(1, ids).unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)
    keep = listed.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = where(keep, hinge, 0.0).sum((1, 2)) / c
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), reduction)


@public(sf=False, functional=True)
def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """Per-class logistic loss on 0/1 targets, averaged over the last (class) dim."""
    op = "multilabel_soft_margin_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    if input.ndim == 0:
        raise _fail(op, "input must have a class dim (1-D or more)", input, target)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.sum(-1) / input.shape[-1], reduction)
