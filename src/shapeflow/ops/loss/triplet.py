"""Triplet losses: an anchor pulled nearer its positive than its negative by a margin, with
the p-norm distance (triplet_margin_loss) or any distance function."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ShapeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..elementwise import minimum
from ..registry import public
from ._common import _reduce, _reduction
from .distance import pairwise_distance


def _check(op: str, margin: float, anchor: Tensor, positive: Tensor, negative: Tensor) -> None:
    if margin <= 0:
        raise ShapeError(f"{op}: margin must be greater than 0, got {margin}", op=op)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeRuntimeError(
            f"{op}: the anchor, positive and negative tensors must have the same number of "
            f"dims, got anchor {anchor.ndim}-D, positive {positive.ndim}-D and negative "
            f"{negative.ndim}-D", op=op,
            operands=[("anchor", describe(anchor)), ("positive", describe(positive)),
                      ("negative", describe(negative))])


def _triplet(distance, anchor: Tensor, positive: Tensor, negative: Tensor, margin: float,
             swap: bool, reduction: str) -> Tensor:
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:  # the positive may be nearer the negative than the anchor is: use the nearer
        d_neg = minimum(d_neg, distance(positive, negative))
    return _reduce((margin + d_pos - d_neg).clamp(min=0), reduction)


@public(functional=True)
def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2, eps: float = 1e-6, swap: bool = False, size_average=None,
                        reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, margin + ||a - p + eps||_p - ||a - n + eps||_p) over the last dim."""
    op = "triplet_margin_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    _check(op, margin, anchor, positive, negative)
    return _triplet(lambda a, b: pairwise_distance(a, b, p, eps), anchor, positive, negative,
                    margin, swap, reduction)


@public(sf=False, functional=True)
def triplet_margin_with_distance_loss(
        anchor: Tensor, positive: Tensor, negative: Tensor, *,
        distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
        margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """max(0, margin + d(a, p) - d(a, n)), d pairwise_distance unless distance_function."""
    op = "triplet_margin_with_distance_loss"
    reduction = _reduction(op, None, None, reduction)
    _check(op, margin, anchor, positive, negative)
    distance = pairwise_distance if distance_function is None else distance_function
    return _triplet(distance, anchor, positive, negative, margin, swap, reduction)
