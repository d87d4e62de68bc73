"""instance_norm: with the batch's statistics, one fused primitive each way; with running
estimates, batch_norm over [1, N*C, spatial], as PyTorch computes it.

Forward normalizes each (sample, channel) plane of [N, C, *spatial] and applies the
per-channel affine in the same pass; backward gives dx, dw and db out of one pass over the
planes (the device's kernels: conv_kernels.c on cpu). Backward keeps the input and two
[N * C] vectors (mean, rstd), counted as normalization statistics, and the weight when the
input needs a gradient.
"""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from ..base import NORM_STATS, Op, Saved, apply
from ..nn._common import _LAYER_X, _compute_np, _create_graph, _need_float, _recording, _stat_dtype
from ..registry import public
from ._common import _affine
from .batch_norm import batch_norm

_W = Saved.input(1)


def _planes(a):
    """[N, C, *spatial] as [N * C, L] (a view when contiguous)."""
    return a.reshape(a.shape[0] * a.shape[1], -1)


class InstanceNorm(Op):
    """(x - mean_nc) * rstd_nc * weight_c + bias_c with each plane's own statistics."""

    name = "instance_norm"

    def __init__(self, eps: float, has_w: bool, has_b: bool) -> None:
        self.eps, self.has_w, self.has_b = eps, has_w, has_b

    def infer(self, x, *wb):
        op = self.name
        _need_float(op, x, "input")
        for t in wb:
            if t.dtype is not x.dtype:
                raise DTypeError(f"{op}: weight and bias must be {x.dtype} as the input, got "
                                 f"{t.dtype}", op=op, operands=[("input", describe(x)),
                                                                ("weight", describe(t))],
                                 hint=f"cast with .to({x.dtype})")
        N, C = x.shape[0], x.shape[1]
        self.C, self.axes = C, tuple(range(2, x.ndim))
        self.stat_dtype = _stat_dtype(x.dtype)
        w = wb[0] if self.has_w else None
        self.need_stats = _recording(x, *wb) and (x.requires_grad or (
            w is not None and w.requires_grad))
        self.rows = N * C
        return x.shape, x.dtype

    def saved(self, x, *wb, out):
        if not self.need_stats:
            return ()
        kept = (_LAYER_X, Saved.new("mean", (self.rows,), self.stat_dtype, NORM_STATS),
                Saved.new("rstd", (self.rows,), self.stat_dtype, NORM_STATS))
        if self.has_w and x.requires_grad:
            kept += (_W,)
        return kept

    def forward(self, x, *wb):
        cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
        w = wb[0].astype(cdt, copy=False) if self.has_w else None
        b = wb[-1].astype(cdt, copy=False) if self.has_b else None
        x2 = self.device.xp.ascontiguousarray(_planes(x), dtype=cdt)
        out, mean, rstd = self.device.kernels.instance_norm(x2, w, b, self.C, self.eps)
        if self.need_stats:
            self.mean, self.rstd = mean, rstd
        return out.reshape(x.shape).astype(x.dtype, copy=False)

    def backward(self, g):
        saved = list(self.saved_tensors)
        gx = gw = gb = None
        if saved:
            x, mean, rstd = saved[0], saved[1], saved[2]
            w = saved[3] if len(saved) > 3 else None
            need_x, need_w = self.needs_grad(0), self.has_w and self.needs_grad(1)
            if _create_graph():
                gx, gw, gb = self._composite_grads(g, x, w, need_x, need_w)
            else:
                kernel = InstanceNormBackward(self.C, need_x, need_w or self.has_b)
                gx = apply(kernel, g, x, mean, rstd, *((w,) if w is not None else ()))
                C = (self.C,)
                gw = Tensor._make(getattr(kernel, "dw", None), C, x.dtype, x.device)
                gb = Tensor._make(getattr(kernel, "db", None), C, x.dtype, x.device)
                gx = gx if need_x else None
        if self.has_b and gb is None:
            gb = g.sum((0,) + self.axes)
        return (gx,) + ((gw,) if self.has_w else ()) + ((gb,) if self.has_b else ())

    def _composite_grads(self, g, x, w, need_x: bool, need_w: bool):
        """The same gradients in differentiable Tensor ops (for create_graph=True)."""
        axes, shape = self.axes, (1, -1) + (1,) * (x.ndim - 2)
        xc = x - x.mean(axes, keepdim=True)
        rstd = ((xc * xc).mean(axes, keepdim=True) + self.eps).rsqrt()
        xhat = xc * rstd
        gx = gw = None
        if need_x:
            dxhat = g * w.reshape(shape) if w is not None else g
            dxhat = dxhat - dxhat.mean(axes, keepdim=True) - \
                xhat * (dxhat * xhat).mean(axes, keepdim=True)
            gx = rstd * dxhat
        if need_w:
            gw = (g * xhat).sum((0,) + axes)
        gb = g.sum((0,) + axes) if self.has_b else None
        return gx, gw, gb


class InstanceNormBackward(Op):
    """dx of instance_norm (zeros when the input needs none); dw and db, summed over the
    batch, come out of the same pass."""

    name = "instance_norm_backward"
    differentiable = False

    def __init__(self, C: int, need_x: bool, need_wb: bool) -> None:
        self.C, self.need_x, self.need_wb = C, need_x, need_wb

    def infer(self, g, x, *rest):
        return x.shape, x.dtype

    def forward(self, g, x, mean, rstd, w=None):
        cdt = rstd.dtype
        xp = self.device.xp
        g2 = xp.ascontiguousarray(_planes(g), dtype=cdt)
        x2 = xp.ascontiguousarray(_planes(x), dtype=cdt)
        w = None if w is None else w.astype(cdt, copy=False)
        dx, dw, db = self.device.kernels.instance_norm_backward(g2, x2, mean, rstd, w, self.C,
                                                                self.need_x, self.need_wb)
        if dw is not None:
            self.dw, self.db = dw.astype(x.dtype), db.astype(x.dtype)
        if dx is None:
            return xp.zeros(x.shape, x.dtype)
        return dx.reshape(x.shape).astype(x.dtype, copy=False)


def instance_norm_fused(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                        eps: float) -> Tensor:
    """instance_norm with the input's statistics and no running estimates, fused."""
    op = "instance_norm"
    C = input.shape[1]
    per_plane = math.prod(input.shape[2:]) if all(type(d) is int for d in input.shape[2:]) \
        else None
    if per_plane == 1:  # PyTorch's check: one value per plane normalizes to 0
        raise ShapeError(f"{op}: expected more than 1 spatial element when training, got "
                         f"input {format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or not dims_equal(t.shape[0], C)):
            raise ShapeError(f"{op}: {name} {format_shape(t.shape)} must be [C] with C = {C}",
                             op=op, operands=[("input", describe(input)), (name, describe(t))])
    extra = tuple(t for t in (weight, bias) if t is not None)
    return apply(InstanceNorm(eps, weight is not None, bias is not None), input, *extra)


@public(sf=False, functional=True)
def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each (sample, channel) plane of [N, C, *spatial] over its spatial dims."""
    op = "instance_norm"
    if input.ndim < 3:
        raise ShapeError(f"{op}: input must be [N, C, *spatial] with at least one spatial dim, "
                         f"got {format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: running_mean and running_var are needed when "
                             "use_input_stats=False")
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is None and running_var is None:  # the usual case: one fused op
        return instance_norm_fused(input, weight, bias, eps)
    N, C = input.shape[0], input.shape[1]
    x = input.reshape(1, N * C, *input.shape[2:])
    rm = rv = None
    if running_mean is not None and running_var is not None:  # one copy per sample
        rm, rv = running_mean.repeat(N), running_var.repeat(N)
    out = batch_norm(x, rm, rv, None, None, True, momentum, eps).reshape(input.shape)
    if rm is not None:  # the running stats: the mean over the batch of the updated copies
        from ...autograd.grad_mode import no_grad

        with no_grad():
            for buf, upd in ((running_mean, rm), (running_var, rv)):
                if buf._data is not None:
                    buf._data[...] = upd._data.reshape(N, C).mean(0)
                buf._version[0] += 1
    return _affine(out, weight, bias, input.ndim)
