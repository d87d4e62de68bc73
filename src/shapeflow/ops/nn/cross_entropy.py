"""Class-target losses: cross_entropy (fused log_softmax + nll) and nll_loss."""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...backend.cpu import kernels
from ...errors import DTypeError, ShapeError, ShapeIndexError, ShapeRuntimeError
from ...shape import dims_equal, format_shape, prod_dims
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import ACTIVATION_INPUT, Op, Saved, apply
from ..blas_sum import row_sums
from ._common import (
    _CHUNK,
    _blocks,
    _compute_np,
    _create_graph,
    _need_float,
    _recording,
    _stat_dtype,
)
from .loss import _check_reduction
from .softmax import _exp_rows_unshifted, _finite_max, log_softmax, softmax


def _rows(a: np.ndarray) -> np.ndarray:
    """[N, C, d1, ...] (class dim 1) or [C] as [rows, C]."""
    if a.ndim == 1:
        return a.reshape(1, -1)
    if a.ndim == 2:
        return a
    return np.moveaxis(a, 1, -1).reshape(-1, a.shape[1])


def _unrows(a2: np.ndarray, shape) -> np.ndarray:
    if len(shape) == 2:
        return a2
    if len(shape) < 2:
        return a2.reshape(shape)
    return np.moveaxis(a2.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)


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
    if t.dtype.category == 2:
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
    elif t.dtype.category == 1:
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


def _class_targets(op: str, t2: np.ndarray, C: int, ignore_index: int):
    """(valid mask or None, targets with ignored entries set to 0); ShapeError if out of range."""
    valid = t2 != ignore_index
    if valid.all():
        valid, tt = None, t2
    else:
        tt = np.where(valid, t2, 0)
    if tt.size and (int(tt.min()) < 0 or int(tt.max()) >= C):
        bad = tt[(tt < 0) | (tt >= C)]
        raise ShapeIndexError(
            f"{op}: target class {int(bad.flat[0])} is out of range for {C} classes "
            f"(valid classes are 0..{C - 1}, or ignore_index={ignore_index})", op=op,
            operands=[("target", f"{format_shape(t2.shape)} {t2.dtype}")],
            hint="check the number of classes the model outputs against the labels")
    return valid, tt


def _max_logsum(x2: np.ndarray, dot: bool = False, coef: np.ndarray | None = None):
    """(m, log(sum(exp(x - m))), d) per row of [rows, C], m the row max (0 where not finite).

    Kept apart, lse - x[t] = (m - x[t]) + logsum loses nothing to lse's rounding (at logits
    of 1e5 float32's spacing, 0.008, would be the loss's error). With `dot`, d is the sum
    over j of coef[.., j] * (m - x[:, j]) (coef None: ones; [C] or [rows, C]), from the same
    pass, else None. A +inf logit gives NaN."""
    rows, n = x2.shape
    m, logs = np.zeros(rows, x2.dtype), np.full(rows, -np.inf, x2.dtype)
    d = np.zeros(rows, x2.dtype) if dot else None
    if n == 0:
        return m, logs, d
    buf = np.empty((min(rows, max(1, _CHUNK // n)), n), x2.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for sl in _blocks(rows, n):
            xb = x2[sl]
            b = buf[: len(xb)]
            # logits <= 64 need no shift (m = 0): lse - x then cancels at most ~1e-5
            s = _exp_rows_unshifted(xb, b)
            if s is None:
                mb = _finite_max(xb, 1)
                np.subtract(xb, mb, out=b)
                if dot:  # x - m, before exp overwrites it
                    d[sl] = -_coef_dot(b, coef, sl)
                np.exp(b, out=b)
                s = row_sums(b)
                m[sl] = mb[:, 0]
            else:
                s = s[:, 0]
                if dot:
                    d[sl] = -_coef_dot(xb, coef, sl)
            logs[sl] = np.log(s, out=s)
    logs[logs == np.inf] = np.nan  # as PyTorch's log_softmax: x - max is NaN at +inf
    return m, logs, d


def _coef_dot(b: np.ndarray, coef: np.ndarray | None, sl: slice) -> np.ndarray:
    """sum over j of coef[.., j] * b[:, j] per row (coef None: ones; [C]; or [rows, C])."""
    if coef is None:
        return row_sums(b)
    if coef.ndim == 1:
        return b @ coef
    return np.einsum("ij,ij->i", b, coef[sl])


def _row_weights(w, tt, valid, cdt):
    """Per-row weight w[target] (1 without weights), 0 for ignored rows."""
    if w is not None:
        wt = w.astype(cdt, copy=False)[tt]
        if valid is not None:
            wt = wt * valid
    else:
        wt = np.ones(len(tt), cdt) if valid is None else valid.astype(cdt)
    return wt


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

    def _fused(self, x, t, w) -> bool:
        """Whether the compiled kernels cover this call (the common classifier case)."""
        return (w is None and not self.prob and not self.eps and x.ndim == 2
                and self.reduction != "none")

    def forward(self, x, t, w=None):
        if self._fused(x, t, w):
            done = kernels.cross_entropy(x, t, self.ii)
            if done is not None:  # one compiled pass over the logits
                total, count, lse = done
                if self.keep:
                    self.lse = lse
                if self.reduction == "mean":
                    total = total / count if count else float("nan")
                return np.asarray(total, x.dtype)
        cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
        x2 = _rows(x)
        if x2.dtype != cdt:
            x2 = x2.astype(cdt)
        R, C = x2.shape
        eps = self.eps
        w1 = None if w is None else w.astype(cdt, copy=False)
        # sum_j c_j (lse - x_j) = logs * sum_j c_j + sum_j c_j (m - x_j): no cancellation
        if self.prob:
            wy = _smoothed(_rows(t).astype(cdt, copy=False), eps, C, w, cdt)
            m, logs, dot = _max_logsum(x2, True, wy)
        else:
            m, logs, dot = _max_logsum(x2, bool(eps), w1)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.prob:
                loss = logs * wy.sum(axis=1) + dot
                denom = R
            else:
                valid, tt = _class_targets(self.name, t.reshape(-1), C, self.ii)
                wt = _row_weights(w, tt, valid, cdt)
                loss = ((m - x2[np.arange(R), tt]) + logs) * wt
                if eps:
                    smooth = logs * (C if w1 is None else w1.sum()) + dot
                    loss = loss * (1 - eps) + smooth * (eps / C)
                if valid is not None:  # left out, whatever they hold (NaN * 0 is NaN)
                    loss[~valid] = 0
                denom = wt.sum()
            if self.reduction == "none":
                out = loss.reshape(self.batch)
            else:
                out = loss.sum()
                if self.reduction == "mean":
                    out = out / denom
        if self.keep:
            self.lse = (m.astype(np.float64) + logs).reshape(self.batch)
        return np.asarray(out).astype(x.dtype, copy=False)

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


def _smoothed(y2, eps, C, w, cdt):
    """Class-probability targets with label smoothing and class weights applied."""
    wy = y2 * (1 - eps) + eps / C if eps else y2.copy() if w is not None else y2
    if w is not None:
        wy *= w.astype(cdt, copy=False)
    return wy


class CrossEntropyBackward(Op):
    """d cross_entropy / d logits: (softmax(x) * a - b) * g per row, in one pass."""

    name = "cross_entropy_backward"
    differentiable = False

    def __init__(self, fwd: CrossEntropy) -> None:
        self.f = fwd

    def infer(self, x, t, lse, g, *w):
        return x.shape, x.dtype

    def forward(self, x, t, lse, g, w=None):
        f, eps = self.f, self.f.eps
        if f._fused(x, t, w) and g.size == 1:
            scale = float(g.reshape(()))
            if f.reduction == "mean":
                scale /= max(1, int(np.count_nonzero(t != f.ii)))
            dx = kernels.cross_entropy_backward(x, t, lse, f.ii, scale)
            if dx is not None:
                return dx
        cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
        x2 = _rows(x)
        R, C = x2.shape
        # lse = hi + lo: exp(x - lse) = exp(x - hi) * exp(-lo), exp(-lo) folded into a
        lse = lse.reshape(-1)
        hi = lse.astype(cdt)
        with np.errstate(invalid="ignore"):
            fade = np.exp(hi - lse).astype(cdt)
        lse2 = hi.reshape(-1, 1)
        g = g.astype(cdt, copy=False)
        if f.reduction == "none":
            scale = g.reshape(-1)
        else:
            scale = np.full(R, g.reshape(()), cdt)
        dx2 = np.empty((R, C), cdt)
        if f.prob:
            if f.reduction == "mean":
                scale = scale / R
            wy = _smoothed(_rows(t).astype(cdt, copy=False), eps, C, w, cdt)
            a = wy.sum(axis=1) * scale * fade
            for sl in _blocks(R, C):
                db = dx2[sl]
                np.subtract(x2[sl], lse2[sl], out=db)
                np.exp(db, out=db)
                db *= a[sl, None]
                db -= wy[sl] * scale[sl, None]
        else:
            valid, tt = _class_targets(f.name, t.reshape(-1), C, f.ii)
            wt = _row_weights(w, tt, valid, cdt)
            if f.reduction == "mean":
                scale = scale / wt.sum()
            if eps:
                w1 = np.ones(C, cdt) if w is None else w.astype(cdt, copy=False)
                vs = scale if valid is None else scale * valid
                a = ((1 - eps) * wt + (eps / C) * w1.sum() * (1 if valid is None else valid))
                a = a * scale
                smooth = (eps / C) * vs
            else:
                a = wt * scale
                smooth = None
            a = a * fade
            with np.errstate(invalid="ignore", over="ignore"):
                for sl in _blocks(R, C):
                    db = dx2[sl]
                    np.subtract(x2[sl], lse2[sl], out=db)
                    np.exp(db, out=db)
                    db *= a[sl, None]
                    if smooth is not None:
                        db -= (np.outer(smooth[sl], w1) if w is not None else smooth[sl, None])
            dx2[np.arange(R), tt] -= (1 - eps) * wt * scale
            if valid is not None:  # ignored rows get no gradient, whatever they hold
                dx2[~valid] = 0
        return _unrows(dx2, x.shape).astype(x.dtype, copy=False)


class _CrossEntropyCoef(Op):
    """The constant b with loss = -sum(b * log_softmax(x)) for class-index targets."""

    name = "cross_entropy_coef"
    differentiable = False

    def __init__(self, fwd: CrossEntropy) -> None:
        self.f = fwd

    def infer(self, t, *w):
        return self.f.x_shape, _stat_dtype(self.f.x_dtype)

    def forward(self, t, w=None):
        f, eps = self.f, self.f.eps
        C = f.C
        cdt = _stat_dtype(f.x_dtype).np
        valid, tt = _class_targets(f.name, t.reshape(-1), C, f.ii)
        wt = _row_weights(w, tt, valid, cdt)
        R = len(tt)
        b = np.zeros((R, C), cdt)
        if eps:
            w1 = np.ones(C, cdt) if w is None else w.astype(cdt)
            b += (eps / C) * w1
            if valid is not None:
                b *= valid[:, None]
        b[np.arange(R), tt] += (1 - eps) * wt
        if f.reduction == "mean":
            b /= wt.sum()
        return _unrows(b, f.x_shape)


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
        cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
        x2 = _rows(x)
        R, C = x2.shape
        valid, tt = _class_targets(self.name, t.reshape(-1), C, self.ii)
        wt = _row_weights(w, tt, valid, cdt)
        loss = -x2[np.arange(R), tt].astype(cdt, copy=False) * wt
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.reduction == "none":
                out = loss.reshape(self.batch)
            else:
                out = loss.sum()
                if self.reduction == "mean":
                    out = out / wt.sum()
        return np.asarray(out).astype(x.dtype, copy=False)

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
        cdt = _compute_np(_dt.from_numpy_dtype(g.dtype))
        R = len(t.reshape(-1))
        valid, tt = _class_targets(f.name, t.reshape(-1), f.C, f.ii)
        wt = _row_weights(w, tt, valid, cdt)
        g = g.astype(cdt, copy=False)
        scale = g.reshape(-1) if f.reduction == "none" else np.full(R, g.reshape(()), cdt)
        if f.reduction == "mean":
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = scale / wt.sum()
        dx2 = np.zeros((R, f.C), cdt)
        dx2[np.arange(R), tt] = -wt * scale
        return _unrows(dx2, f.x_shape).astype(g.dtype, copy=False)

    def backward(self, gg):
        saved = self.saved_tensors
        return (apply(NllLoss(self.f.ii, self.f.reduction, self.f.has_weight), gg, *saved),
                None) + ((None,) if self.f.has_weight else ())


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities input [N, C, d...] at class indices."""
    if _autocast_hot.on:  # sf.autocast: fp32
        input, target, weight = _autocast.fp32(input, target, weight)
    _check_reduction("nll_loss", reduction)
    extra = (weight,) if weight is not None else ()
    return apply(NllLoss(ignore_index, reduction, weight is not None), input, target, *extra)
