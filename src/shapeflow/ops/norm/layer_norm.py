"""layer_norm: one row-blocked primitive each way, stats saved for backward.

rms_norm (rms_norm.py) is the same primitive without the mean: `_Norm` and its backward
kernels serve both.
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeRuntimeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import NORM_STATS, Op, Saved, apply
from ..nn._common import (
    _LAYER_X,
    _as_rows,
    _compute_np,
    _create_graph,
    _need_float,
    _recording,
    _stat_dtype,
)
from ..registry import public


def _norm_shape(normalized_shape) -> tuple:
    if isinstance(normalized_shape, (tuple, list)):
        return tuple(normalized_shape)
    return (normalized_shape,)


class _Norm(Op):
    """Shared contract of layer_norm and rms_norm over the last len(normalized_shape) dims."""

    rms = False

    def __init__(self, normalized_shape, eps, has_w: bool, has_b: bool) -> None:
        self.ns, self.eps, self.has_w, self.has_b = normalized_shape, eps, has_w, has_b

    def infer(self, x, *wb):
        op, ns, k = self.name, self.ns, len(self.ns)
        _need_float(op, x)
        tail = tuple(x.shape[x.ndim - k:]) if x.ndim >= k else None
        if tail is None or not all(dims_equal(a, b) for a, b in zip(tail, ns)):
            hint = "normalized_shape must equal the last dims of x"
            if x.ndim >= 2 and k == 1 and dims_equal(x.shape[1], ns[0]) and x.ndim > 2:
                hint = (f"{op} normalizes the last dims: for a channels-first input "
                        f"{format_shape(x.shape)} move the channels last "
                        f"(x.movedim(1, -1)) or use a GroupNorm")
            raise ShapeRuntimeError(
                f"{op}: normalized_shape {format_shape(ns)} does not match the last "
                f"{k} dim{'s' if k > 1 else ''} of x {format_shape(x.shape)}", op=op,
                operands=[("x", describe(x))], hint=hint)
        for name, t in zip(("weight", "bias") if self.has_w else ("bias",), wb):
            if tuple(t.shape) != tuple(ns) and not (
                    len(t.shape) == k and all(dims_equal(a, b) for a, b in zip(t.shape, ns))):
                raise ShapeRuntimeError(
                    f"{op}: {name} {format_shape(t.shape)} does not match normalized_shape "
                    f"{format_shape(ns)}", op=op,
                    operands=[("x", describe(x)), (name, describe(t))])
            if t.dtype is not x.dtype:
                raise DTypeError(f"{op}: {name} is {t.dtype} but x is {x.dtype}", op=op,
                                 operands=[("x", describe(x)), (name, describe(t))],
                                 hint=f"cast with .to({x.dtype})")
        self.k = k
        self.lead = x.ndim - k
        self.stat_shape = tuple(x.shape[: self.lead]) + (1,) * k
        self.stat_dtype = _stat_dtype(x.dtype)
        w = wb[0] if self.has_w else None
        self.need_stats = _recording(x, *wb) and (x.requires_grad or (
            w is not None and w.requires_grad))
        return x.shape, x.dtype

    def saved(self, x, *wb, out):
        if not self.need_stats:
            return ()
        kept = (_LAYER_X,)
        if not self.rms:
            kept += (Saved.new("mean", self.stat_shape, self.stat_dtype, NORM_STATS),)
        kept += (Saved.new("rstd", self.stat_shape, self.stat_dtype, NORM_STATS),)
        if self.has_w and x.requires_grad:
            kept += (Saved.input(1),)
        return kept

    def forward(self, x, *wb):
        # the inputs after x are (weight, bias), (weight,) or (bias,): the flags say which
        w = wb[0] if self.has_w else None
        b = wb[-1] if self.has_b else None
        n = math.prod(x.shape[self.lead:])
        cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
        w1 = None if w is None else w.reshape(n).astype(cdt, copy=False)
        b1 = None if b is None else b.reshape(n).astype(cdt, copy=False)
        # one compiled pass per row where it applies, else NumPy's blocked rows
        result, mean, rstd = self.device.kernels.layer_norm(_as_rows(x, n), w1, b1, self.eps,
                                                            self.rms)
        if self.need_stats:
            if mean is not None:
                self.mean = mean.reshape(self.stat_shape)
            self.rstd = rstd.reshape(self.stat_shape)
        return result.reshape(x.shape)

    def backward(self, g):
        saved = list(self.saved_tensors)
        gx = gw = gb = None
        lead = tuple(range(self.lead))
        if saved:
            need_x, need_w = self.needs_grad(0), self.has_w and self.needs_grad(1)
            x = saved.pop(0)
            mean = None if self.rms else saved.pop(0)
            rstd = saved.pop(0)
            w = saved.pop(0) if self.has_w and need_x else None
            if _create_graph():
                gx, gw = self._composite_grads(g, x, w, need_x, need_w)
            else:
                stats = (rstd,) if self.rms else (mean, rstd)
                both = need_x and need_w
                if need_x:
                    kernel = NormBackward(self.rms, self.lead, self.has_w, with_dw=both)
                    gx = apply(kernel, g, x, *stats, *((w,) if w is not None else ()))
                    if both:  # the weight's gradient came out of the same pass
                        gw = Tensor._make(getattr(kernel, "dw", None), tuple(x.shape[self.lead:]),
                                          x.dtype, x.device)
                elif need_w:
                    gw = apply(NormWeightBackward(self.rms, self.lead), g, x, *stats)
        if self.has_b:
            gb = g.sum(lead) if lead else g
        return (gx,) + ((gw,) if self.has_w else ()) + ((gb,) if self.has_b else ())

    def _composite_grads(self, g, x, w, need_x: bool, need_w: bool):
        """The same gradients in differentiable Tensor ops (for create_graph=True)."""
        dims = tuple(range(self.lead, x.ndim))
        if self.rms:
            xc = x
        else:
            xc = x - x.mean(dims, keepdim=True)
        rstd = ((xc * xc).mean(dims, keepdim=True) + self.eps).rsqrt()
        xhat = xc * rstd
        dxhat = g * w if w is not None else g
        gx = gw = None
        if need_x:
            inner = dxhat - xhat * (dxhat * xhat).mean(dims, keepdim=True)
            if not self.rms:
                inner = inner - dxhat.mean(dims, keepdim=True)
            gx = rstd * inner
        if need_w:
            gw = g * xhat
            if self.lead:
                gw = gw.sum(tuple(range(self.lead)))
        return gx, gw


class LayerNorm(_Norm):
    name = "layer_norm"


class NormBackward(Op):
    """dx of layer_norm / rms_norm from x and the saved stats: rstd * (dxhat - ...).

    With `with_dw`, the weight's gradient (sum over rows of g * xhat) comes out of the same
    pass as `self.dw`, so xhat is computed once.
    """

    name = "layer_norm_backward"
    differentiable = False

    def __init__(self, rms: bool, lead: int, has_w: bool, with_dw: bool = False) -> None:
        self.rms, self.lead, self.has_w, self.with_dw = rms, lead, has_w, with_dw

    def infer(self, g, x, *rest):
        return x.shape, x.dtype

    def forward(self, g, x, *rest):
        if self.rms:
            mean, rstd = None, rest[0]
        else:
            mean, rstd = rest[0], rest[1]
        w = rest[-1] if self.has_w else None
        n = math.prod(x.shape[self.lead:])
        r2 = rstd.reshape(-1, 1)
        m2 = None if mean is None else mean.reshape(-1, 1)
        w1 = None if w is None else w.reshape(n).astype(rstd.dtype, copy=False)
        dx, dw = self.device.kernels.layer_norm_backward(_as_rows(g, n), _as_rows(x, n), m2, r2,
                                                         w1, self.with_dw)
        if dw is not None:
            self.dw = dw.reshape(x.shape[self.lead:])
        return dx.reshape(x.shape)


class NormWeightBackward(Op):
    """d weight of layer_norm / rms_norm: sum over rows of g * xhat."""

    name = "layer_norm_weight_backward"
    differentiable = False

    def __init__(self, rms: bool, lead: int) -> None:
        self.rms, self.lead = rms, lead

    def infer(self, g, x, *stats):
        return tuple(x.shape[self.lead:]), x.dtype

    def forward(self, g, x, *stats):
        rstd = stats[-1]
        mean = None if self.rms else stats[0]
        n = math.prod(x.shape[self.lead:])
        m2 = None if mean is None else mean.reshape(-1, 1)
        dw = self.device.kernels.layer_norm_weight_backward(_as_rows(g, n), _as_rows(x, n), m2,
                                                            rstd.reshape(-1, 1))
        return dw.reshape(x.shape[self.lead:])


@public(functional=True)
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dims (biased variance)."""
    if _autocast_hot.on:  # sf.autocast: a bfloat16 input with float32 weights gives bfloat16
        weight, bias = _autocast.params_like(input, weight, bias)
    ns = _norm_shape(normalized_shape)
    extra = tuple(t for t in (weight, bias) if t is not None)
    return apply(LayerNorm(ns, eps, weight is not None, bias is not None), input, *extra)
