"""Class-target losses: cross_entropy (fused log_softmax + nll) and nll_loss."""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import dims_equal, format_shape, prod_dims
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import ACTIVATION_INPUT, Op, Saved, apply
from ..nn._common import _create_graph, _need_float, _recording, _stat_dtype
from ..nn.softmax import log_softmax, softmax
from ..registry import public
from ._common import _check_reduction


def _class_contract(op: str, x, t, w, allow_prob: bool):
    """Checks input [N, C, ...] / [C] against target; returns (batch shape, C, prob)."""
    ops = [("input", describe(x)), ("target", describe(t))]
    _need_float(op, x, "input")
    if x.ndim == 0:
        raise ShapeRuntimeError(f"{op}: input must have a class dim ([N, C] or [C]), got a 0-d "
                                "tensor", op=op, operands=ops)
    cax = 1 if x.ndim >= 2 else 0
    C = x.shape[cax]
    batch = tuple(x.shape[:cax]) + tuple(x.shape[cax + 1:])
    same = len(t.shape) == len(x.shape) and all(dims_equal(a, b) for a, b in
                                                zip(t.shape, x.shape))
    fits = len(t.shape) == len(batch) and all(dims_equal(a, b) for a, b in zip(t.shape, batch))
    prob = False
    if t.dtype.is_floating_point:
        if same and allow_prob:
            prob = True
            if t.dtype is not x.dtype:
                raise DTypeError(f"{op}: probability target is {t.dtype} but input is "
                                 f"{x.dtype}", op=op, operands=ops,
                                 hint=f"cast the target with .to({x.dtype})")
        elif fits:
            raise DTypeError(
                f"{op}: target holds {t.dtype} values of shape {format_shape(t.shape)}; class "
                "indices must be integers", op=op, operands=ops,
                hint=f"{op} expects integer class indices of shape {format_shape(batch)} (got "
                f"{t.dtype} {format_shape(t.shape)}); use target.long()")
        else:
            raise _target_shape_error(op, x, t, batch, ops, allow_prob)
    elif t.dtype.is_integer:
        if not fits:
            if same and allow_prob:
                raise DTypeError(
                    f"{op}: a target of the input's shape {format_shape(x.shape)} holds class "
                    f"probabilities and must be floating point, got {t.dtype}", op=op,
                    operands=ops, hint=f"use target.to({x.dtype}), or pass class indices of "
                    f"shape {format_shape(batch)}")
            raise _target_shape_error(op, x, t, batch, ops, allow_prob)
    else:
        raise DTypeError(f"{op}: target must hold integer class indices, got {t.dtype}",
                         op=op, operands=ops, hint="use target.long()")
    if w is not None:
        if len(w.shape) != 1 or not dims_equal(w.shape[0], C):
            raise ShapeRuntimeError(f"{op}: weight {format_shape(w.shape)} must be 1-D with one "
                                    f"entry per class ({C})", op=op,
                                    operands=ops + [("weight", describe(w))])
        if w.dtype is not x.dtype:
            raise DTypeError(f"{op}: weight is {w.dtype} but input is {x.dtype}", op=op,
                             operands=ops + [("weight", describe(w))],
                             hint=f"cast it with .to({x.dtype})")
    return batch, C, prob


def _target_shape_error(op, x, t, batch, ops, allow_prob) -> ShapeError:
    want = f"class indices of shape {format_shape(batch)}"
    if allow_prob:
        want += f" or class probabilities of shape {format_shape(x.shape)}"
    hint = None
    ts, xs = tuple(t.shape), tuple(x.shape)
    if len(ts) == len(batch) + 1 and ts[-1] == 1 and all(
            dims_equal(a, b) for a, b in zip(ts[:-1], batch)):
        hint = f"the target has an extra unit dim: use target.squeeze({len(ts) - 1})"
    elif x.ndim >= 3 and len(ts) == x.ndim - 1 and all(
            dims_equal(a, b) for a, b in zip(ts, xs[:-1])):
        hint = (f"the class dim of input must be dim 1 (as in PyTorch), but input "
                f"{format_shape(xs)} looks like [..., C]: use input.movedim(-1, 1), or "
                f"input.reshape(-1, {xs[-1]}) with target.reshape(-1)")
    elif x.ndim >= 2 and len(ts) == 1 and dims_equal(ts[0], prod_dims(batch)):
        hint = f"reshape the target to {format_shape(batch)}"
    return ShapeError(
        f"{op}: target {format_shape(ts)} does not match input {format_shape(xs)}: expected "
        f"{want}", op=op, operands=ops, hint=hint)


class CrossEntropy(Op):
    """log_softmax + nll in one kernel, for class-index or class-probability targets.

    Saves the logits (often alive anyway) and one logsumexp per row, not the [N, C] probs.
    """

    name = "cross_entropy"

    def __init__(self, ignore_index: int, reduction: str, label_smoothing: float,
                 has_weight: bool) -> None:
        self.ii, self.reduction, self.eps = ignore_index, reduction, label_smoothing
        self.has_weight = has_weight

    def infer(self, x, t, *w):
        self.batch, self.C, self.prob = _class_contract(self.name, x, t, w[0] if w else None,
                                                        True)
        self.cax = 1 if x.ndim >= 2 else 0
        self.x_shape, self.x_dtype = x.shape, x.dtype
        self.need = (x.requires_grad, self.prob and t.requires_grad)
        self.keep = _recording(x, t) and any(self.need)
        return (self.batch if self.reduction == "none" else ()), x.dtype

    def saved(self, x, t, *w, out):
        if not self.keep:
            return ()
        kept = (Saved.input(0, ACTIVATION_INPUT), Saved.input(1))
        if w:
            kept += (Saved.input(2),)
        # float64: backward's exp(x - lse) must not see lse rounded to x's spacing
        return kept + (Saved.new("lse", self.batch, _dt.float64),)

    def forward(self, x, t, w=None):
        # float32 [N, C] class indices: one compiled pass over the logits; else NumPy's
        out, lse = self.device.kernels.cross_entropy(x, t, w, self.ii, self.reduction, self.eps,
                                                     self.prob, self.keep)
        if self.keep:
            self.lse = lse
        return out

    def backward(self, g):
        if not self.keep:  # only the class weights required grad: they get none
            return (None, None) + ((None,) if self.has_weight else ())
        saved = self.saved_tensors
        x, t, lse = saved[0], saved[1], saved[-1]
        w = saved[2] if self.has_weight else None
        extra = (w,) if w is not None else ()
        gx = gt = None
        if _create_graph():
            gx, gt = self._composite_grads(g, x, t, w)
        else:
            if self.need[0]:
                gx = apply(CrossEntropyBackward(self), x, t, lse, g, *extra)
            if self.need[1]:
                gt = self._target_grad(g, log_softmax(x, self.cax), w)
        return (gx, gt) + ((None,) if self.has_weight else ())

    def _row_grad(self, g: Tensor, x: Tensor) -> Tensor:
        """The upstream gradient broadcastable against x (one value per row)."""
        if self.reduction == "none":
            return g.unsqueeze(self.cax) if self.batch else g
        if self.reduction == "mean" and self.prob:
            return g / prod_dims(self.batch)  # probability targets average over rows
        return g

    def _class_view(self, w: Tensor, ndim: int) -> Tensor:
        shape = [1] * ndim
        shape[self.cax] = self.C
        return w.reshape(tuple(shape))

    def _target_grad(self, g, logp, w):
        coef = logp * -(1 - self.eps)
        if w is not None:
            coef = coef * self._class_view(w, logp.ndim)
        return coef * self._row_grad(g, logp)

    def _composite_grads(self, g, x, t, w):
        gb = self._row_grad(g, x)
        p = softmax(x, self.cax)
        if self.prob:
            wy = t * (1 - self.eps) + self.eps / self.C
            if w is not None:
                wy = wy * self._class_view(w, x.ndim)
            gx = (p * wy.sum(self.cax, keepdim=True) - wy) * gb if self.need[0] else None
            gt = self._target_grad(g, log_softmax(x, self.cax), w) if self.need[1] else None
            return gx, gt
        extra = (w,) if w is not None else ()
        coef = apply(_CrossEntropyCoef(self), t, *extra)
        return (p * coef.sum(self.cax, keepdim=True) - coef) * gb, None


class CrossEntropyBackward(Op):
    """d cross_entropy / d logits: (softmax(x) * a - b) * g per row, in one pass."""

    name = "cross_entropy_backward"
    differentiable = False

    def __init__(self, fwd: CrossEntropy) -> None:
        self.f = fwd

    def infer(self, x, t, lse, g, *w):
        return x.shape, x.dtype

    def forward(self, x, t, lse, g, w=None):
        f = self.f
        return self.device.kernels.cross_entropy_backward(x, t, lse, g, w, f.ii, f.reduction,
                                                          f.eps, f.prob)


class _CrossEntropyCoef(Op):
    """The constant b with loss = -sum(b * log_softmax(x)) for class-index targets."""

    name = "cross_entropy_coef"
    differentiable = False

    def __init__(self, fwd: CrossEntropy) -> None:
        self.f = fwd

    def infer(self, t, *w):
        return self.f.x_shape, _stat_dtype(self.f.x_dtype)

    def forward(self, t, w=None):
        f = self.f
        return self.device.kernels.cross_entropy_coef(t, w, f.C, f.ii, f.reduction, f.eps,
                                                      f.x_shape, _stat_dtype(f.x_dtype).np)


@public(sf=False, functional=True)
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits input [N, C, d...] or [C] with class indices or probabilities.

    Class dim 1 as in PyTorch; targets are int class indices [N, d...] (or 0-d for [C]) or
    float probabilities of the input's shape.
    """
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target, weight = _autocast.fp32(input, target, weight)
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ShapeError(f"cross_entropy: label_smoothing must be in [0, 1], got "
                         f"{label_smoothing}")
    op = CrossEntropy(ignore_index, reduction, float(label_smoothing), weight is not None)
    extra = (weight,) if weight is not None else ()
    return apply(op, input, target, *extra)


class NllLoss(Op):
    """-input[target] * weight[target] from log-probabilities input [N, C, d...] or [C]."""

    name = "nll_loss"

    def __init__(self, ignore_index: int, reduction: str, has_weight: bool) -> None:
        self.ii, self.reduction, self.has_weight = ignore_index, reduction, has_weight

    def infer(self, x, t, *w):
        self.batch, self.C, _ = _class_contract(self.name, x, t, w[0] if w else None, False)
        self.x_shape = x.shape
        return (self.batch if self.reduction == "none" else ()), x.dtype

    def saved(self, x, t, *w, out):
        return (Saved.input(1),) + ((Saved.input(2),) if w else ()) if x.requires_grad else ()

    def forward(self, x, t, w=None):
        return self.device.kernels.nll_loss(x, t, w, self.ii, self.reduction)

    def backward(self, g):
        saved = self.saved_tensors
        if not saved:  # only the class weights required grad: they get none
            return (None, None) + ((None,) if self.has_weight else ())
        return (apply(NllLossBackward(self), g, *saved), None) + (
            (None,) if self.has_weight else ())


class NllLossBackward(Op):
    """d nll_loss / d input: -weight[t] * g at each target entry, zero elsewhere (linear in g)."""

    name = "nll_loss_backward"

    def __init__(self, fwd: NllLoss) -> None:
        self.f = fwd

    def infer(self, g, t, *w):
        return self.f.x_shape, g.dtype

    def saved(self, g, t, *w, out):
        return (Saved.input(1),) + ((Saved.input(2),) if w else ())

    def forward(self, g, t, w=None):
        f = self.f
        return self.device.kernels.nll_loss_backward(g, t, w, f.C, f.ii, f.reduction,
                                                     f.x_shape)

    def backward(self, gg):
        saved = self.saved_tensors
        return (apply(NllLoss(self.f.ii, self.f.reduction, self.f.has_weight), gg, *saved),
                None) + ((None,) if self.f.has_weight else ())


@public(sf=False, functional=True)
def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities input [N, C, d...] at class indices."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target, weight = _autocast.fp32(input, target, weight)
    _check_reduction("nll_loss", reduction)
    extra = (weight,) if weight is not None else ()
    return apply(NllLoss(ignore_index, reduction, weight is not None), input, target, *extra)
