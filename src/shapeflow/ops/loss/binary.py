"""Binary cross-entropy, of logits (stable sigmoid + BCE) and of probabilities."""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import broadcast_shapes, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import X0, X1, Op, Saved, apply
from ..registry import public
from ._common import _check_pair, _check_reduction, _reduce

_F32 = _dt.float32.np


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


@public(sf=False, functional=True)
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


@public(sf=False, functional=True)
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
