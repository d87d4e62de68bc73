"""More of PyTorch's losses and distances (smooth L1, Huber, KL, margins, Gaussian/Poisson NLL).

Each is a short composite of differentiable ops whose values and gradients equal PyTorch's
formulas, so they need no backward of their own and run on the meta device as well.
"""

from __future__ import annotations

import math

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ShapeError, ShapeRuntimeError
from ...shape import broadcast_shapes, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..elementwise.compare import where
from ..matrix.norms import vector_norm
from .loss import _check_pair, _reduce


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


def _huber(z: Tensor, delta: float) -> Tensor:
    """0.5 z^2 for z < delta, delta (z - 0.5 delta) beyond: m^2/2 + delta (z - m), m = min(z, d)."""
    m = z.clamp(max=delta)
    return 0.5 * m.square() + delta * (z - m)


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


def _check_targets(op: str, input: Tensor, target: Tensor, expect: tuple) -> None:
    if tuple(target.shape) != tuple(expect):
        raise ShapeRuntimeError(f"{op}: target {format_shape(target.shape)} must have shape "
                                f"{format_shape(expect)} for input {format_shape(input.shape)}",
                                op=op, operands=[("input", describe(input)),
                                                 ("target", describe(target))])


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """max(0, -target (input1 - input2) + margin), target holding 1 or -1."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input1, input2, target = _autocast.fp32(input1, input2, target)
    reduction = _reduction("margin_ranking_loss", size_average, reduce, reduction)
    _check_same("margin_ranking_loss", ("input1", "input2", "target"), input1, input2, target)
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0), reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), target holding 1 or -1."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    _check_same("soft_margin_loss", ("input", "target"), input, target)
    return _reduce((-target * input).exp().log1p(), reduction)


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
    if var._data is not None and var.numel() and float(var._data.min()) < 0:
        raise ShapeError(f"{op}: var has negative entry", op=op,
                         operands=[("var", describe(var))])
    # PyTorch clamps var in place under no_grad: the value is clamped, the gradient is not
    var = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target).square() / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """exp(input) - target input (log_input) or input - target log(input + eps); full adds
    Stirling's term for target > 1."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    op = "poisson_nll_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
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


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of x1 and x2 along dim (broadcast): each divided by max(its norm, eps), summed."""
    s1, s2 = tuple(x1.shape), tuple(x2.shape)
    if s1 != s2:  # dim counts in the broadcast shape, so norms are taken after expanding
        shape = tuple(broadcast_shapes(s1, s2, "cosine_similarity", ("x1", "x2")))
        x1, x2 = x1.expand(*shape), x2.expand(*shape)
    n1 = vector_norm(x1, 2, dim=dim, keepdim=True).clamp(min=eps)
    n2 = vector_norm(x2, 2, dim=dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """p-norm of x1 - x2 + eps over the last dim (inputs broadcast)."""
    diff = x1 - x2 + eps
    if diff.dim() == 0:
        return vector_norm(diff.unsqueeze(0), p, dim=0, keepdim=keepdim)
    return vector_norm(diff, p, dim=-1, keepdim=keepdim)


__all__ = ["smooth_l1_loss", "huber_loss", "kl_div", "margin_ranking_loss", "soft_margin_loss",
           "cosine_embedding_loss", "gaussian_nll_loss", "poisson_nll_loss", "cosine_similarity",
           "pairwise_distance"]
