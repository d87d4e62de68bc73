"""Losses of distributions: KL divergence and the Gaussian and Poisson negative
log-likelihoods.

Each is a short composite of differentiable ops whose values and gradients equal PyTorch's
formulas, so they need no backward of their own and run on the meta device as well.
"""

from __future__ import annotations

import math

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ShapeError, ShapeRuntimeError
from ...shape import broadcast_shapes, dims_equal, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import reads_data
from ..elementwise.compare import where
from ..registry import public
from ._common import _check_pair, _reduce, _reduction


@public(sf=False, functional=True)
def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL divergence of target from input (input holds log-probabilities), pointwise then reduced.

    reduction='batchmean' divides the sum by the batch size, the mathematically proper KL.
    """
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    reduction = _reduction("kl_div", size_average, reduce, reduction,
                           ("none", "mean", "sum", "batchmean"))
    _check_pair("kl_div", input, target)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.dim() > 0 else total
    return _reduce(loss, reduction)


@public(sf=False, functional=True)
def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """0.5 (log var + (input - target)^2 / var), var clamped to eps as PyTorch (grad passes)."""
    op = "gaussian_nll_loss"
    reduction = _reduction(op, None, None, reduction)
    # unlike mse_loss, PyTorch broadcasts input against target here, silently
    broadcast_shapes(input.shape, target.shape, op, ("input", "target"))
    if not isinstance(var, Tensor):
        if var < 0:
            raise ShapeError(f"{op}: var has negative entry", op=op)
        var = input.new_full(tuple(input.shape), float(var))
    si, sv = tuple(input.shape), tuple(var.shape)
    if sv != si:
        if si[:-1] == sv:
            var = var.unsqueeze(-1)  # homoscedastic over the last dim
        elif not (len(si) == len(sv) and [b for a, b in zip(si, sv) if a != b] == [1]):
            raise ShapeRuntimeError(f"{op}: var {format_shape(sv)} does not fit input "
                                    f"{format_shape(si)} (same shape, one dim fewer, or one "
                                    "dim 1)", op=op, operands=[("input", describe(input)),
                                                               ("var", describe(var))])
    if var._data is None:
        reads_data(f"{op}'s check that var is not negative")
    elif var.numel() and float(var._data.min()) < 0:
        raise ShapeError(f"{op}: var has negative entry", op=op,
                         operands=[("var", describe(var))])
    # PyTorch clamps var in place under no_grad: the value is clamped, the gradient is not
    var = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target).square() / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def _integer_pair(input: Tensor, target: Tensor) -> bool:
    """Whether an integer input or target meets one of its own shape (PyTorch takes those:
    the loss comes out in the promoted floating dtype); other pairs go to _check_pair."""
    dts = (input.dtype, target.dtype)
    return any(d.is_integer for d in dts) and \
        all(d.is_integer or d.is_floating_point for d in dts) and \
        len(input.shape) == len(target.shape) and \
        all(dims_equal(a, b) is True for a, b in zip(input.shape, target.shape))


@public(sf=False, functional=True)
def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """exp(input) - target input (log_input) or input - target log(input + eps); full adds
    Stirling's term for target > 1."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    op = "poisson_nll_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    if not _integer_pair(input, target):
        _check_pair(op, input, target)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        big = target > 1
        safe = where(big, target, 2.0)  # keeps log finite where the term is masked off
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + where(big, stirling, 0.0)
    return _reduce(loss, reduction)
