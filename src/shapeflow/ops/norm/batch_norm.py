"""batch_norm: per-channel statistics over [N, C, *spatial], one fused primitive each way.

Training normalizes with the batch's mean and biased variance and hands the unbiased
variance to the caller for the running estimate (as PyTorch); eval normalizes with the
running estimates. Either way backward keeps the input and two [C] vectors (mean, invstd),
counted as normalization statistics.
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from ..base import NORM_STATS, Op, Saved, apply, effect
from ..nn._common import _LAYER_X, _compute_np, _create_graph, _need_float, _recording, _stat_dtype
from ..registry import public

_W = Saved.input(1)


def _rows(a):
    """[N, C, *spatial] as [N, C, L] (a view when contiguous)."""
    return a.reshape(a.shape[0], a.shape[1], -1)


class BatchNorm(Op):
    """(x - mean_c) * invstd_c * weight_c + bias_c, stats from the batch or running ones."""

    name = "batch_norm"

    def __init__(self, training: bool, eps: float, has_w: bool, has_b: bool,
                 has_running: bool = False, want_stats: bool = False) -> None:
        self.training, self.eps, self.has_w, self.has_b = training, eps, has_w, has_b
        # in eval, the running mean and variance are the last two inputs (inputs, not
        # arrays kept here: sf.compile's replay reads them afresh, as it reads weights)
        self.has_running, self.want_stats = has_running, want_stats
        self.n_wb = has_w + has_b

    def infer(self, x, *wb):
        op = self.name
        wb = wb[:self.n_wb]
        _need_float(op, x, "input")
        if x.ndim < 2:
            raise ShapeError(f"{op}: input must be [N, C, *spatial], got {format_shape(x.shape)}",
                             op=op, operands=[("input", describe(x))],
                             hint="add a batch dim with x.unsqueeze(0)")
        C = x.shape[1]
        for name, t in zip(("weight", "bias") if self.has_w else ("bias",), wb):
            if t.ndim != 1 or not dims_equal(t.shape[0], C):
                raise ShapeError(f"{op}: {name} {format_shape(t.shape)} must be [C] with C = "
                                 f"{C} (the input's dim 1)", op=op,
                                 operands=[("input", describe(x)), (name, describe(t))])
            if t.dtype is not x.dtype:
                raise DTypeError(f"{op}: {name} is {t.dtype} but input is {x.dtype}", op=op,
                                 operands=[("input", describe(x)), (name, describe(t))],
                                 hint=f"cast with .to({x.dtype})")
        if self.training:
            per_channel = math.prod(x.shape) // C if all(type(d) is int for d in x.shape) \
                else None
            if per_channel == 1:
                raise ShapeError(
                    f"{op}: expected more than 1 value per channel when training, got input "
                    f"{format_shape(x.shape)}", op=op, operands=[("input", describe(x))],
                    hint="use a batch of more than one sample, or call model.eval()")
        self.axes = (0,) + tuple(range(2, x.ndim))
        self.stat_dtype = _stat_dtype(x.dtype)
        self.C = C
        w = wb[0] if self.has_w else None
        self.need_stats = _recording(x, *wb) and (x.requires_grad or (
            w is not None and w.requires_grad))
        return x.shape, x.dtype

    def saved(self, x, *wb, out):
        wb = wb[:self.n_wb]
        if not self.need_stats:
            return ()
        kept = (_LAYER_X, Saved.new("mean", (self.C,), self.stat_dtype, NORM_STATS),
                Saved.new("invstd", (self.C,), self.stat_dtype, NORM_STATS))
        if self.has_w and x.requires_grad:
            kept += (_W,)
        return kept

    def forward(self, x, *wb):
        running = wb[self.n_wb:] if self.has_running else None
        w = wb[0] if self.has_w else None
        b = wb[self.n_wb - 1] if self.has_b else None
        cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
        x3 = _rows(x)
        if x3.dtype != cdt:
            x3 = x3.astype(cdt)
        # float32 with the batch's statistics: three compiled passes; else NumPy's
        out, mean, invstd, sq = self.device.kernels.batch_norm(
            x3, w, b, self.eps, None if self.training else running)
        if self.want_stats:  # for the running estimate: the unbiased variance
            n = x3.shape[0] * x3.shape[2]
            self.batch_stats = (mean, sq / max(n - 1, 1))
        if self.need_stats:
            self.mean, self.invstd = mean, invstd
        return out.reshape(x.shape).astype(x.dtype, copy=False)

    def backward(self, g):
        saved = list(self.saved_tensors)
        gx = gw = gb = None
        if saved:
            x, mean, invstd = saved[0], saved[1], saved[2]
            w = saved[3] if len(saved) > 3 else None
            need_x, need_w = self.needs_grad(0), self.has_w and self.needs_grad(1)
            if _create_graph() or not need_x:
                gx, gw, gb = self._composite_grads(g, x, mean, invstd, w, need_x, need_w)
            else:
                kernel = BatchNormBackward(self.training)
                gx = apply(kernel, g, x, mean, invstd, *((w,) if w is not None else ()))
                C = (self.C,)
                gw = Tensor._make(getattr(kernel, "dw", None), C, x.dtype, x.device)
                gb = Tensor._make(getattr(kernel, "db", None), C, x.dtype, x.device)
        if self.has_b and gb is None:
            gb = g.sum(self.axes)
        return (gx,) + ((gw,) if self.has_w else ()) + ((gb,) if self.has_b else ()) + \
            ((None, None) if self.has_running else ())

    def _composite_grads(self, g, x, mean, invstd, w, need_x: bool, need_w: bool):
        """The same gradients in differentiable Tensor ops (for create_graph=True)."""
        axes, shape = self.axes, (1, -1) + (1,) * (x.ndim - 2)
        if self.training:  # stats are functions of x: recompute them on the graph
            xc = x - x.mean(axes, keepdim=True)
            rstd = ((xc * xc).mean(axes, keepdim=True) + self.eps).rsqrt()
        else:
            xc = x - mean.reshape(shape).to(x.dtype)
            rstd = invstd.reshape(shape).to(x.dtype)
        xhat = xc * rstd
        gx = gw = None
        if need_x:
            dxhat = g * w.reshape(shape) if w is not None else g
            if self.training:
                dxhat = dxhat - dxhat.mean(axes, keepdim=True) - \
                    xhat * (dxhat * xhat).mean(axes, keepdim=True)
            gx = rstd * dxhat
        if need_w:
            gw = (g * xhat).sum(axes)
        gb = g.sum(axes) if self.has_b else None
        return gx, gw, gb


class BatchNormBackward(Op):
    """dx of batch_norm as g * k1_c + x * k2_c + k3_c; dw and db come out of the same pass."""

    name = "batch_norm_backward"
    differentiable = False

    def __init__(self, training: bool) -> None:
        self.training = training

    def infer(self, g, x, *rest):
        return x.shape, x.dtype

    def forward(self, g, x, mean, invstd, w=None):
        cdt = invstd.dtype
        g3, x3 = _rows(g), _rows(x)
        if g3.dtype != cdt:
            g3, x3 = g3.astype(cdt), x3.astype(cdt)
        # float32: sums, then dx, in two compiled passes; else NumPy's
        dx, dw, db = self.device.kernels.batch_norm_backward(g3, x3, mean, invstd, w,
                                                              self.training)
        self.dw, self.db = dw.astype(x.dtype, copy=False), db.astype(x.dtype, copy=False)
        return dx.reshape(x.shape).astype(x.dtype, copy=False)


@public(sf=False, functional=True)
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """PyTorch's F.batch_norm over [N, C, *spatial]; training updates the running stats."""
    op = "batch_norm"
    if not training and (running_mean is None or running_var is None):
        raise ValueError(f"{op}: running_mean and running_var are needed when not training")
    C = input.shape[1] if input.ndim >= 2 else None
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None and (t.ndim != 1 or C is None or not dims_equal(t.shape[0], C)):
            raise ShapeError(f"{op}: {name} {format_shape(t.shape)} must be [C] with C = {C} "
                             f"(the input's dim 1)", op=op,
                             operands=[("input", describe(input)), (name, describe(t))])
    update = training and running_mean is not None and running_var is not None
    # on meta forward does not run: no statistics come back and nothing is written
    # eval reads the running stats as inputs; a meta input (shapes only: nothing is read)
    # may come with stats on another device, as a summary of a cpu model does
    running = not training and (input.device.computes or (
        running_mean.device is input.device and running_var.device is input.device))
    kernel = BatchNorm(training, eps, weight is not None, bias is not None, running,
                       want_stats=update)
    extra = tuple(t for t in (weight, bias) if t is not None)
    if running:
        extra += (running_mean, running_var)
    out = apply(kernel, input, *extra)
    if update:
        def update_running(kernel: BatchNorm) -> None:
            stats = kernel.__dict__.pop("batch_stats", None)
            for buf, new in zip((running_mean, running_var), stats or (None, None)):
                if buf._data is not None and new is not None:  # nothing to write on meta
                    buf._data *= 1.0 - momentum
                    buf._data += (momentum * new).astype(buf._data.dtype, copy=False)
                buf._version[0] += 1

        effect(update_running, kernel, (running_mean, running_var))
    return out
