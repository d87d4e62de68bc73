"""Margin and ranking losses on targets of 1 or -1: margin ranking, soft margin, cosine
embedding, hinge embedding."""

from __future__ import annotations

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..elementwise import where
from ..registry import public
from ._common import _check_same, _check_targets, _reduce, _reduction


@public(sf=False, functional=True)
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, -target (input1 - input2) + margin), target holding 1 or -1."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input1, input2, target = _autocast.fp32(input1, input2, target)
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    _check_same("margin_ranking_loss", ("input1", "input2", "target"), input1, input2, target)
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


@public(sf=False, functional=True)
def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), target holding 1 or -1."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    _check_same("soft_margin_loss", ("input", "target"), input, target)
    return _reduce((-target * input).exp().log1p(), reduction)


@public(sf=False, functional=True)
def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input1, input2, target = _autocast.fp32(input1, input2, target)
    op = "cosine_embedding_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    _check_same(op, ("input1", "input2"), input1, input2)
    if input1.dim() not in (1, 2):
        raise ShapeRuntimeError(f"{op}: inputs must be 1-D or 2-D, got "
                                f"{format_shape(input1.shape)}", op=op,
                                operands=[("input1", describe(input1))])
    d = 0 if input1.dim() == 1 else 1
    _check_targets(op, input1, target, tuple(input1.shape)[:d])
    eps = 1e-12  # PyTorch's EPSILON in the magnitudes, so a zero vector gives cos 0
    prod = (input1 * input2).sum(d)
    mag = ((input1 * input1).sum(d) + eps) * ((input2 * input2).sum(d) + eps)
    cos = prod / mag.sqrt()
    pos = (target == 1).to(cos.dtype) * (1.0 - cos)
    neg = (target == -1).to(cos.dtype) * (cos - margin).clamp(min=0)
    return _reduce(pos + neg, reduction)


@public(functional=True)  # torch.hinge_embedding_loss too
def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average=None,
                         reduce=None, reduction: str = "mean") -> Tensor:
    """x where target is 1, max(0, margin - x) where it is -1 (input and target broadcast)."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    # PyTorch's two terms: a target that is neither 1 nor -1 gets both
    below = where(target != 1, (margin - input).clamp(min=0), 0.0)
    return _reduce(below + where(target != -1, input, 0.0), reduction)
