"""Regression losses of input against a target of one shape: mse, l1, smooth L1, Huber."""

from __future__ import annotations

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ShapeError
from ...tensor import Tensor
from .. import autocast as _autocast
from ..registry import public
from ._common import _check_pair, _check_reduction, _check_same, _reduce, _reduction


@public(sf=False, functional=True)
def mse_loss(input: Tensor, target: Tensor, *, reduction: str = "mean") -> Tensor:
    """Mean squared error; input and target must have the same shape."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    _check_reduction("mse_loss", reduction)
    _check_pair("mse_loss", input, target)
    return _reduce((input - target).square(), reduction)


@public(sf=False, functional=True)
def l1_loss(input: Tensor, target: Tensor, *, reduction: str = "mean") -> Tensor:
    """Mean absolute error; input and target must have the same shape."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    _check_reduction("l1_loss", reduction)
    _check_pair("l1_loss", input, target)
    return _reduce((input - target).abs(), reduction)


def _huber(z: Tensor, delta: float) -> Tensor:
    """0.5 z^2 for z < delta, delta (z - 0.5 delta) beyond: m^2/2 + delta (z - m), m = min(z, d)."""
    m = z.clamp(max=delta)
    return 0.5 * m.square() + delta * (z - m)


@public(sf=False, functional=True)
def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 (x - y)^2 / beta where |x - y| < beta, else |x - y| - 0.5 beta; L1 when beta is 0."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    reduction = _reduction("smooth_l1_loss", size_average, reduce, reduction)
    _check_pair("smooth_l1_loss", input, target)
    if beta < 0:
        raise ShapeError(f"smooth_l1_loss: beta must be non-negative, got {beta}",
                         op="smooth_l1_loss")
    z = (input - target).abs()
    loss = z if beta == 0 else _huber(z, beta) * (1.0 / beta)
    return _reduce(loss, reduction)


@public(sf=False, functional=True)
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 (x - y)^2 where |x - y| < delta, else delta (|x - y| - 0.5 delta); optional weight."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    reduction = _reduction("huber_loss", None, None, reduction)
    _check_pair("huber_loss", input, target)
    if delta <= 0:
        raise ShapeError(f"huber_loss: delta must be positive, got {delta}", op="huber_loss")
    loss = _huber((input - target).abs(), delta)
    if weight is not None:
        _check_same("huber_loss", ("input", "weight"), input, weight)
        loss = loss * weight
    return _reduce(loss, reduction)
