"""Regression and binary losses (mse, l1, binary cross-entropy) and the reduction checks."""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import broadcast_shapes, dims_equal, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import X0, X1, Op, Saved, apply

_REDUCTIONS = ("none", "mean", "sum")
_F32 = _dt.float32.np


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
        if input.dtype.category != 2 or target.dtype.category != 2:
            bad = "input" if input.dtype.category != 2 else "target"
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


def mse_loss(input: Tensor, target: Tensor, *, reduction: str = "mean") -> Tensor:
    """Mean squared error; input and target must have the same shape."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    _check_reduction("mse_loss", reduction)
    _check_pair("mse_loss", input, target)
    return _reduce((input - target).square(), reduction)


def l1_loss(input: Tensor, target: Tensor, *, reduction: str = "mean") -> Tensor:
    """Mean absolute error; input and target must have the same shape."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target = _autocast.fp32(input, target)
    _check_reduction("l1_loss", reduction)
    _check_pair("l1_loss", input, target)
    return _reduce((input - target).abs(), reduction)


class BCEWithLogits(Op):
    """(1 - y) x + (1 + (pw - 1) y) softplus(-x), times weight: stable for any x."""

    name = "binary_cross_entropy_with_logits"

    def __init__(self, has_w: bool, has_pw: bool) -> None:
        self.has_w, self.has_pw = has_w, has_pw

    def infer(self, x, y, *extra):
        _check_pair(self.name, x, y)
        names = (("weight",) if self.has_w else ()) + (("pos_weight",) if self.has_pw else ())
        for name, e in zip(names, extra):
            if e.dtype is not x.dtype:
                raise DTypeError(f"{self.name}: {name} is {e.dtype} but input is {x.dtype}",
                                 op=self.name, operands=[("input", describe(x)),
                                                         (name, describe(e))],
                                 hint=f"cast it with .to({x.dtype})")
            shape = broadcast_shapes(tuple(x.shape), tuple(e.shape), self.name,
                                     ("input", name))
            if tuple(shape) != tuple(x.shape):
                raise ShapeRuntimeError(f"{self.name}: {name} {format_shape(e.shape)} does not "
                                        f"broadcast to input {format_shape(x.shape)}", op=self.name,
                                        operands=[("input", describe(x)), (name, describe(e))])
        return x.shape, x.dtype

    def saved(self, x, y, *extra, out):
        return tuple(Saved.input(i) for i in range(2 + len(extra)))

    def forward(self, x, y, *extra):
        xp = self.device.xp
        w = extra[0] if self.has_w else None
        pw = extra[-1] if self.has_pw else None
        sp = xp.log1p(xp.exp(-xp.abs(x)))  # softplus(-x) = log1p(exp(-|x|)) + max(-x, 0)
        sp += xp.maximum(-x, 0)
        if pw is not None:
            sp *= (pw - 1) * y + 1
        loss = (1 - y) * x  # as PyTorch: not x - x * y, whose inf * 0 makes an inf logit NaN
        loss += sp
        if w is not None:
            loss *= w
        return loss

    def backward(self, g):
        saved = self.saved_tensors
        x, y = saved[0], saved[1]
        w = saved[2] if self.has_w else None
        pw = saved[-1] if self.has_pw else None
        gw_ = g * w if w is not None else g
        grads = [None] * len(saved)
        nxt = [n is not None for n in self.next[0::3]]  # which inputs get a gradient
        s = x.sigmoid()
        if pw is not None:
            lw = (pw - 1.0) * y + 1.0
            sp = (-x).softplus()
            if nxt[0]:
                grads[0] = gw_ * ((1.0 - y) - lw * (1.0 - s))
            if nxt[1]:
                grads[1] = gw_ * ((pw - 1.0) * sp - x)
            if nxt[-1]:
                grads[-1] = gw_ * y * sp
        else:
            if nxt[0]:
                grads[0] = gw_ * (s - y)
            if nxt[1]:
                grads[1] = gw_ * -x
        if w is not None and nxt[2]:
            unweighted = apply(BCEWithLogits(False, pw is not None), x, y,
                               *((pw,) if pw is not None else ()))
            grads[2] = g * unweighted
        return tuple(grads)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, *,
                                     reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy on logits (a stable sigmoid + BCE), PyTorch's signature."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target, weight, pos_weight = _autocast.fp32(input, target, weight, pos_weight)
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    extra = tuple(t for t in (weight, pos_weight) if t is not None)
    loss = apply(BCEWithLogits(weight is not None, pos_weight is not None), input, target,
                 *extra)
    return _reduce(loss, reduction)


def _check_probabilities(op: str, p: Tensor) -> None:
    """PyTorch's rule: every input in [0, 1] (NaN too fails it); values are checked on cpu."""
    a = p._data
    if a is None or not a.size:
        return
    lo, hi = a.min(), a.max()  # NaN propagates into both, and fails both comparisons
    if not (lo >= 0 and hi <= 1):
        raise ShapeError(
            f"{op}: all elements of input should be between 0 and 1, found values in "
            f"[{lo}, {hi}]", op=op, operands=[("input", describe(p))],
            hint="for logits use binary_cross_entropy_with_logits (or apply sigmoid first)")


class BinaryCrossEntropy(Op):
    """(y - 1) max(log1p(-p), -100) - y max(log p, -100) per element, PyTorch's kernel.

    Its own backward is PyTorch's: g (p - y) / max(p (1 - p), 1e-12), finite at p = 0 and 1
    where the composite's log backward divides 0 by 0."""

    name = "binary_cross_entropy"

    def infer(self, p, y):
        return p.shape, _dt.promote_types(p.dtype, y.dtype)

    def saved(self, p, y, out):
        return (X0, X1)

    def forward(self, p, y):
        xp = self.device.xp
        dt = xp.result_type(p.dtype, y.dtype)
        half = dt.itemsize == 2  # bfloat16/float16: float32 steps, rounded once
        if half:  # widening is exact; narrowing rounds to nearest even (as the C cast does)
            p, y = p.astype(_F32), y.astype(_F32)
        elif p.dtype != dt or y.dtype != dt:
            p, y = p.astype(dt), y.astype(dt)
        with xp.errstate(divide="ignore"):
            lp = xp.maximum(xp.log(p), -100)
            lq = xp.maximum(xp.log1p(-p), -100)
        loss = xp.asarray((y - 1) * lq - y * lp)
        return loss.astype(dt) if half else loss

    def backward(self, g):
        p, y = self.saved_tensors
        gp = gy = None
        if self.needs_grad(0):
            gp = g * (p - y) / ((1.0 - p) * p).clamp(min=1e-12)
        if self.needs_grad(1):
            gy = g * -(p / (1.0 - p)).log()  # -logit(p), unclamped, as PyTorch
        return gp, gy


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities input in [0, 1] (logs clamped at -100)."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target, weight = _autocast.fp32(input, target, weight)
    _check_reduction("binary_cross_entropy", reduction)
    _check_pair("binary_cross_entropy", input, target)
    _check_probabilities("binary_cross_entropy", input)
    loss = apply(BinaryCrossEntropy(), input, target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)
