"""Neural-network primitives: linear, softmax, norms, embedding, dropout, losses, attention.

Each is one fused primitive (one NumPy kernel forward, a minimal `saved` set). Backward
takes one of two paths: during an ordinary backward (grad mode off) it calls private
NumPy kernels (`*_backward` ops below, fast and memory-lean); under
`create_graph=True` it writes the same gradient with differentiable Tensor ops, so a
gradient of a gradient is exact. Row-wise kernels work on blocks of rows that stay in
cache (`_blocks`), which is about twice as fast as whole-array passes.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..backend import gemm, kernels
from ..errors import DTypeError, ShapeError
from ..random import get_rng
from ..shape import broadcast_shapes, dims_equal, format_shape, normalize_dim, prod_dims
from ..tensor import Tensor, describe
from .base import (
    ACTIVATION_INPUT,
    ATTENTION,
    DROPOUT_MASK,
    LAYER_INPUT,
    NORM_STATS,
    OUT_ACT,
    X0_ACT,
    X1,
    Op,
    Saved,
    apply,
)
from .blas_sum import col_sums, row_means, row_sums
from .elementwise import where

_CHUNK = 1 << 16  # elements per block of rows (256 KiB of float32: stays in L2)
_LAYER_X = Saved.input(0, LAYER_INPUT)
_KEEP_X_W, _KEEP_X, _KEEP_W = (_LAYER_X, X1), (_LAYER_X,), (X1,)  # what linear keeps


# ---- helpers ----------------------------------------------------------------------------
def _recording(*inputs) -> bool:
    """Whether apply() will record this op (so forward should keep what backward needs)."""
    return grad_mode.state.enabled and any(t.requires_grad for t in inputs)


def _create_graph() -> bool:
    """Inside backward: True when create_graph=True (grads must be differentiable)."""
    return grad_mode.state.enabled


def _compute_np(dt: _dt.DType):
    """float16/bfloat16 are computed in float32 (as PyTorch's CPU kernels do)."""
    return dt.np if dt is _dt.float32 or dt is _dt.float64 else np.dtype(np.float32)


def _stat_dtype(dt: _dt.DType) -> _dt.DType:
    return dt if dt is _dt.float32 or dt is _dt.float64 else _dt.float32


def _need_float(op: str, x: Tensor, name: str = "x", hint: str | None = None) -> None:
    if x.dtype.category != 2:
        raise DTypeError(
            f"{op}: {name} must be floating point, got {x.dtype}", op=op,
            operands=[(name, describe(x))],
            hint=hint or f"call {name}.float() first")


def _dense(g: Tensor) -> Tensor:
    """g without zero strides (a broadcast upstream grad, e.g. from sum()): NumPy's matmul
    falls back from BLAS to a slow loop on those."""
    d = g.data
    if d is not None and d.ndim and not d.flags.c_contiguous and 0 in d.strides:
        return g.contiguous()
    return g


def _blocks(rows: int, n: int):
    """Slices of rows covering [0, rows), each about _CHUNK elements."""
    step = max(1, _CHUNK // max(n, 1))
    for i in range(0, rows, step):
        yield slice(i, i + step)


def _as_rows(a: np.ndarray, n: int) -> np.ndarray:
    """The array as [rows, n] over its trailing elements (a view when it can be)."""
    return a.reshape(-1, n) if n else a.reshape(a.size, 0)


def _finite_max(a: np.ndarray, axis: int) -> np.ndarray:
    """Row maxima, with non-finite ones replaced by 0 (so all -inf rows give exp(-inf) = 0)."""
    m = a.max(axis=axis, keepdims=True)
    bad = ~np.isfinite(m)
    if bad.any():
        m[bad] = 0
    return m


# Softmax without the row maxima where it is safe: exp(x) itself cannot overflow when the
# block's largest value is <= 64, and row sums >= 2^-20 lose no probability above 1e-32 to
# underflow. NumPy's row max costs ~85 ns a row; one full max and one check cost ~1.
_NO_SHIFT_MAX, _NO_SHIFT_MIN_SUM = 64.0, 2.0**-20


def _exp_rows_unshifted(xb: np.ndarray, e: np.ndarray):
    """exp(xb) into e and its row sums [k, 1], or None where shifting by the max is needed."""
    top = xb.max() if xb.size else 0.0
    if not top <= _NO_SHIFT_MAX:  # also NaN
        return None
    np.exp(xb, out=e)
    s = row_sums(e)[:, None]
    return s if s.min() >= _NO_SHIFT_MIN_SUM else None


def _softmax_rows(x2: np.ndarray, out: np.ndarray, log: bool, zero_empty: bool = False):
    """softmax (or log_softmax) of each row of x2 into out (may be x2 itself)."""
    rows, n = x2.shape
    buf = np.empty((min(rows, max(1, _CHUNK // max(n, 1))), n), out.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for sl in _blocks(rows, n):
            xb, ob = x2[sl], out[sl]
            e = buf[: len(ob)]
            s = _exp_rows_unshifted(xb, e)
            if s is not None:
                if log:
                    np.subtract(xb, np.log(s, out=s), out=ob)
                else:
                    np.divide(e, s, out=ob)
                continue
            m = _finite_max(xb, 1)
            np.subtract(xb, m, out=ob)
            if log:
                e = np.exp(ob, out=e)
                s = row_sums(e)[:, None]
                ob -= np.log(s, out=s)
            else:
                np.exp(ob, out=ob)
                s = row_sums(ob)[:, None]
                if zero_empty:
                    s[s == 0] = 1  # a fully masked attention row gives zeros, as PyTorch does
                ob /= s
    return out


def _softmax_np(x: np.ndarray, axis: int, log: bool, out_dtype) -> np.ndarray:
    shape = x.shape
    if x.ndim == 0:
        x, axis = x.reshape(1), 0
    cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
    if x.dtype != cdt:
        x = x.astype(cdt)
    if x.size == 0:
        return np.empty(shape, out_dtype)
    n = x.shape[axis]
    zero_d = len(shape) == 0
    if axis == x.ndim - 1 and x.flags.c_contiguous:
        out = np.empty(x.shape, cdt)
        _softmax_rows(_as_rows(x, n), _as_rows(out, n), log)
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = np.subtract(x, _finite_max(x, axis))
            if log:
                out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))
            else:
                np.exp(out, out=out)
                out /= out.sum(axis=axis, keepdims=True)
    return (out.reshape(shape) if zero_d else out).astype(out_dtype, copy=False)


def _lse_rows(x2: np.ndarray) -> np.ndarray:
    """logsumexp of each row of a [rows, n] array (stable, blocked), shape [rows]."""
    rows, n = x2.shape
    out = np.empty(rows, x2.dtype)
    buf = np.empty((min(rows, max(1, _CHUNK // max(n, 1))), n), x2.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for sl in _blocks(rows, n):
            xb = x2[sl]
            b = buf[: len(xb)]
            s = _exp_rows_unshifted(xb, b)
            if s is not None:
                out[sl] = np.log(s[:, 0])
                continue
            m = _finite_max(xb, 1)
            np.subtract(xb, m, out=b)
            np.exp(b, out=b)
            s = row_sums(b)
            out[sl] = np.log(s, out=s) + m[:, 0]
    return out


# ---- linear -----------------------------------------------------------------------------
class Linear(Op):
    """x @ weight.T + bias in one kernel; weight is [out_features, in_features]."""

    name = "linear"

    def __init__(self, has_bias: bool) -> None:
        self.has_bias = has_bias

    def infer(self, x, w, *b):
        xs, ws, dt = x.shape, w.shape, x.dtype
        ok = len(ws) == 2 and len(xs) >= 1 and dt is w.dtype and dt.category == 2
        if ok:
            a, c = xs[-1], ws[1]
            ok = a == c if type(a) is int and type(c) is int else dims_equal(a, c) is True
        if not ok:
            _linear_error(x, w)
        if b:
            bs = b[0].shape
            if len(bs) != 1 or dims_equal(bs[0], ws[0]) is not True or b[0].dtype is not dt:
                raise ShapeError(
                    f"linear: bias {format_shape(bs)} does not match out_features of weight "
                    f"{format_shape(ws)} ({ws[0]})", op="linear",
                    operands=[("x", describe(x)), ("weight", describe(w)),
                              ("bias", describe(b[0]))],
                    hint=f"bias must be 1-D of size out_features = {ws[0]}")
        return tuple(xs[:-1]) + (ws[0],), dt

    def saved(self, x, w, *b, out):
        # w's gradient needs x, x's needs w
        if w.requires_grad:
            return _KEEP_X_W if x.requires_grad else _KEEP_X
        return _KEEP_W if x.requires_grad else ()

    def forward(self, x, w, b=None):
        if x.ndim == 2:
            return gemm.matmul(x, w.T, b)
        lead = x.shape[:-1]
        out = gemm.matmul(x.reshape(math.prod(lead), x.shape[-1]), w.T, b)
        return out.reshape(lead + (w.shape[0],))

    def backward(self, g):
        saved = list(self.saved_tensors)
        x = saved.pop(0) if self.needs_grad(1) else None
        w = saved.pop(0) if self.needs_grad(0) else None
        g = _dense(g)
        if not _create_graph() and g.dtype in _DIRECT_DTYPES:
            return self._grads_from_arrays(g, x, w)
        shape = g.shape
        gx = gw = gb = None
        g2 = g if len(shape) == 2 else g.reshape(prod_dims(shape[:-1]), shape[-1])
        if w is not None:
            gx = g2 @ w
            if len(shape) != 2:
                gx = gx.reshape(tuple(shape[:-1]) + (w.shape[1],))
        if x is not None:
            x2 = x if x.ndim == 2 else x.reshape(prod_dims(x.shape[:-1]), x.shape[-1])
            gw = g2.mT @ x2
        if self.has_bias:
            gb = g2.sum(0)
            return gx, gw, gb
        return gx, gw

    def _grads_from_arrays(self, g, x, w):
        """The same three gradients straight from the arrays (no grad of grad needed):
        two gemms and a column sum, without an op dispatch for each product."""
        shape, dt, dev = tuple(g.shape), g.dtype, g.device
        out_f = shape[-1]
        in_f = (w if w is not None else x).shape[-1]
        ga = g.data
        g2 = None if ga is None else ga.reshape(-1, out_f)
        gx = gw = None
        if w is not None:
            gx = Tensor._make(None if g2 is None else gemm.matmul(g2, w.data).reshape(
                shape[:-1] + (in_f,)), shape[:-1] + (in_f,), dt, dev)
        if x is not None:
            x2 = None if g2 is None else x.data.reshape(-1, in_f)
            gw = Tensor._make(None if g2 is None else gemm.matmul(g2.T, x2), (out_f, in_f),
                              dt, dev)
        if self.has_bias:
            gb = Tensor._make(None if g2 is None else col_sums(g2), (out_f,), dt, dev)
            return gx, gw, gb
        return gx, gw


_DIRECT_DTYPES = (_dt.float32, _dt.float64)


def _linear_error(x, w):
    ops = [("x", describe(x)), ("weight", describe(w))]
    if w.ndim != 2:
        raise ShapeError(f"linear: weight must be 2-D [out_features, in_features], got "
                         f"{format_shape(w.shape)}", op="linear", operands=ops)
    if x.ndim == 0:
        raise ShapeError("linear: x must have at least 1 dim, got a 0-d tensor", op="linear",
                         operands=ops, hint="use x.reshape(1) for a single feature")
    if x.dtype.category != 2:
        raise DTypeError(
            f"linear: x has dtype {x.dtype}; linear needs floating-point input", op="linear",
            operands=ops, hint="call x.float() first (token ids go through an Embedding "
            "layer, not a Linear)")
    if w.dtype is not x.dtype:
        raise DTypeError(f"linear: x is {x.dtype} but weight is {w.dtype}", op="linear",
                         operands=ops, hint=f"cast x with x.to({w.dtype}) (or the layer with "
                         f".to({x.dtype}))")
    a, c = x.shape[-1], w.shape[1]
    if dims_equal(a, c) is None:
        raise ShapeError(f"linear: cannot tell whether x's last dim ({a}) == in_features of "
                         f"weight {format_shape(w.shape)} ({c})", op="linear", operands=ops,
                         hint="bind the symbols to sizes or use the same name for both")
    if dims_equal(a, w.shape[0]):
        hint = (f"the weight looks transposed: linear expects [out_features, in_features] = "
                f"[?, {a}], got {format_shape(w.shape)}; pass weight.T (nn.Linear stores "
                f"[out, in])")
    else:
        hint = (f"x must end in in_features={c}: check the size the previous layer "
                f"produces, or flatten x first (x.reshape(x.shape[0], -1))")
    raise ShapeError(
        f"linear: x's last dim ({a}) != in_features of weight {format_shape(w.shape)} ({c})",
        op="linear", operands=ops, hint=hint)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = input @ weight.T + bias (weight [out_features, in_features])."""
    if bias is None:
        return apply(Linear(False), input, weight)
    return apply(Linear(True), input, weight, bias)


# ---- softmax ----------------------------------------------------------------------------
class Softmax(Op):
    name = "softmax"
    log = False

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x):
        _need_float(self.name, x)
        self.axis = normalize_dim(self.dim, x.ndim, self.name) if x.ndim else 0
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,)

    def forward(self, x):
        return _softmax_np(x, self.axis, self.log, x.dtype)

    def backward(self, g):
        (out,) = self.saved_tensors
        d = self.axis if out.ndim else None
        if _create_graph() or out.ndim == 0:
            return (out * (g - (g * out).sum(d, keepdim=True)),)
        return (apply(SoftmaxBackward(self.axis), out, g),)


class LogSoftmax(Softmax):
    name = "log_softmax"
    log = True

    def backward(self, g):
        (out,) = self.saved_tensors
        d = self.axis if out.ndim else None
        return (g - out.exp() * g.sum(d, keepdim=True),)


class SoftmaxBackward(Op):
    """d softmax: scale * p * (m*g - sum(p * m*g)) along axis, for g, p and a keep mask m."""

    name = "softmax_backward"
    differentiable = False

    def __init__(self, axis: int, scale: float = 1.0) -> None:
        self.axis, self.scale = axis, scale

    def infer(self, p, g, *mask):
        return p.shape, p.dtype

    def forward(self, p, g, mask=None):
        n = p.shape[self.axis]
        if mask is None and self.axis == p.ndim - 1 and n:
            dx = kernels.softmax_backward(_as_rows(p, n), _as_rows(g, n), self.scale)
            if dx is not None:  # one compiled pass over each row, twice
                return dx.reshape(p.shape)
        dx = np.multiply(g, p, dtype=p.dtype)
        if mask is not None:
            dx *= mask
        n = p.shape[self.axis]
        if self.axis == p.ndim - 1 and p.flags.c_contiguous and dx.flags.c_contiguous:
            d2, p2 = _as_rows(dx, n), _as_rows(p, n)
            buf = np.empty((min(len(p2), max(1, _CHUNK // max(n, 1))), n), p.dtype)
            for sl in _blocks(len(p2), n):
                db = d2[sl]
                s = row_sums(db)[:, None]
                db -= np.multiply(p2[sl], s, out=buf[: len(db)])
        else:
            dx -= p * dx.sum(axis=self.axis, keepdims=True)
        if self.scale != 1.0:
            dx *= self.scale
        return dx


def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim (computed stably); dim is required."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(Softmax(dim), input)


def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """x - logsumexp(x) along dim (stable); dim is required."""
    if dtype is not None:
        input = input.to(dtype)
    return apply(LogSoftmax(dim), input)


# ---- normalization ----------------------------------------------------------------------
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
            raise ShapeError(
                f"{op}: normalized_shape {format_shape(ns)} does not match the last "
                f"{k} dim{'s' if k > 1 else ''} of x {format_shape(x.shape)}", op=op,
                operands=[("x", describe(x))], hint=hint)
        for name, t in zip(("weight", "bias") if self.has_w else ("bias",), wb):
            if tuple(t.shape) != tuple(ns) and not (
                    len(t.shape) == k and all(dims_equal(a, b) for a, b in zip(t.shape, ns))):
                raise ShapeError(
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

    def forward(self, x, w=None, b=None):
        n = math.prod(x.shape[self.lead:])
        cdt = _compute_np(_dt.from_numpy_dtype(x.dtype))
        x2 = _as_rows(x, n)
        w1 = None if w is None else w.reshape(n).astype(cdt, copy=False)
        b1 = None if b is None else b.reshape(n).astype(cdt, copy=False)
        fused = kernels.layer_norm(x2, w1, b1, self.eps, self.rms)
        if fused is not None:  # one compiled pass per row
            result, mean, rstd = fused
            if self.need_stats:
                if mean is not None:
                    self.mean = mean.reshape(self.stat_shape)
                self.rstd = rstd.reshape(self.stat_shape)
            return result.reshape(x.shape)
        rows = len(x2)
        result = np.empty(x.shape, cdt)
        out = _as_rows(result, n)
        mean = None if self.rms else np.empty((rows, 1), cdt)
        rstd = np.empty((rows, 1), cdt)
        buf = np.empty((min(rows, max(1, _CHUNK // max(n, 1))), n), cdt)
        eps = self.eps
        for sl in _blocks(rows, n):
            xb, ob = x2[sl], out[sl]
            if xb.dtype != cdt:
                xb = xb.astype(cdt)
            if self.rms:
                v = row_means(np.square(xb, out=buf[: len(xb)]))
                np.copyto(ob, xb)
            else:
                m = row_means(xb)
                np.subtract(xb, m, out=ob)
                v = row_means(np.square(ob, out=buf[: len(xb)]))
                mean[sl] = m
            v += eps
            r = np.sqrt(v, out=v)
            np.reciprocal(r, out=r)
            ob *= r
            rstd[sl] = r
            if w1 is not None:
                ob *= w1
            if b1 is not None:
                ob += b1
        if self.need_stats:
            if mean is not None:
                self.mean = mean.reshape(self.stat_shape)
            self.rstd = rstd.reshape(self.stat_shape)
        return result.astype(x.dtype, copy=False)

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


class RMSNorm(_Norm):
    name = "rms_norm"
    rms = True


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
        cdt = rstd.dtype
        x2, g2 = _as_rows(x, n), _as_rows(g, n)
        r2 = rstd.reshape(-1, 1)
        m2 = None if mean is None else mean.reshape(-1, 1)
        w1 = None if w is None else w.reshape(n).astype(cdt, copy=False)
        fused = kernels.layer_norm_backward(g2, x2, m2, r2, w1, self.with_dw)
        if fused is not None:  # two compiled passes per row
            dx, dw = fused
            if dw is not None:
                self.dw = dw.reshape(x.shape[self.lead:]).astype(x.dtype)
            return dx.reshape(x.shape)
        rows = len(x2)
        result = np.empty(x.shape, cdt)
        dx = _as_rows(result, n)
        step = min(rows, max(1, _CHUNK // max(n, 1)))
        xh_buf, dh_buf = np.empty((step, n), cdt), np.empty((step, n), cdt)
        dw = np.zeros(n, cdt) if self.with_dw else None
        for sl in _blocks(rows, n):
            xb, gb, ob, rb = x2[sl], g2[sl], dx[sl], r2[sl]
            k = len(xb)
            xhat = xh_buf[:k]
            if m2 is None:
                np.multiply(xb, rb, out=xhat)
            else:
                np.subtract(xb, m2[sl], out=xhat)
                xhat *= rb
            if w1 is not None:
                dxhat = np.multiply(gb, w1, out=dh_buf[:k])
            else:
                dxhat = gb if gb.dtype == cdt else gb.astype(cdt)
            if dw is not None:  # g * xhat, summed over rows (ob is free until below)
                dw += col_sums(np.multiply(gb, xhat, out=ob))
            np.multiply(dxhat, xhat, out=ob)
            c = row_means(ob)
            xhat *= c
            np.subtract(dxhat, xhat, out=ob)
            if m2 is not None:
                ob -= row_means(dxhat)
            ob *= rb
        if dw is not None:
            self.dw = dw.reshape(x.shape[self.lead:]).astype(x.dtype, copy=False)
        return result.astype(x.dtype, copy=False)


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
        cdt = rstd.dtype
        x2, g2 = _as_rows(x, n), _as_rows(g, n)
        r2 = rstd.reshape(-1, 1)
        m2 = None if mean is None else mean.reshape(-1, 1)
        result = np.zeros(x.shape[self.lead:], cdt)
        acc = result.reshape(n)
        buf = np.empty((min(len(x2), max(1, _CHUNK // max(n, 1))), n), cdt)
        for sl in _blocks(len(x2), n):
            xb = x2[sl]
            xhat = buf[: len(xb)]
            if m2 is None:
                np.multiply(xb, r2[sl], out=xhat)
            else:
                np.subtract(xb, m2[sl], out=xhat)
                xhat *= r2[sl]
            xhat *= g2[sl]
            acc += col_sums(xhat)
        return result.astype(x.dtype, copy=False)


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dims (biased variance)."""
    ns = _norm_shape(normalized_shape)
    extra = tuple(t for t in (weight, bias) if t is not None)
    return apply(LayerNorm(ns, eps, weight is not None, bias is not None), input, *extra)


def _finfo_eps(dt: _dt.DType) -> float:
    if dt is _dt.bfloat16:
        import ml_dtypes

        return float(ml_dtypes.finfo(ml_dtypes.bfloat16).eps)
    return float(np.finfo(dt.np).eps) if dt.category == 2 else float(np.finfo(np.float32).eps)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dims; eps defaults to finfo.eps."""
    ns = _norm_shape(normalized_shape)
    if eps is None:
        eps = _finfo_eps(input.dtype)
    extra = (weight,) if weight is not None else ()
    return apply(RMSNorm(ns, eps, weight is not None, False), input, *extra)


# ---- embedding, one_hot -----------------------------------------------------------------
class Embedding(Op):
    """weight[input]: rows of the table picked by integer indices."""

    name = "embedding"

    def __init__(self, padding_idx: int | None = None, scale_grad_by_freq: bool = False) -> None:
        self.padding_idx, self.by_freq = padding_idx, scale_grad_by_freq

    def infer(self, idx, w):
        ops = [("input", describe(idx)), ("weight", describe(w))]
        if idx.dtype.category != 1:
            raise DTypeError(
                f"embedding: input must hold integer indices, got {idx.dtype}",
                op="embedding", operands=ops,
                hint=f"embedding indices must be integers; got {idx.dtype} — did you pass "
                "the embeddings instead of token ids?" if idx.dtype.category == 2 else
                "convert the indices with .long()")
        if w.ndim != 2:
            raise ShapeError(
                f"embedding: weight must be 2-D [num_embeddings, embedding_dim], got "
                f"{format_shape(w.shape)}", op="embedding", operands=ops)
        self.num = w.shape[0]
        return tuple(idx.shape) + (w.shape[1],), w.dtype

    def saved(self, idx, w, out):
        return (Saved.input(0),) if w.requires_grad else ()

    def forward(self, idx, w):
        _check_indices("embedding", idx, self.num, "num_embeddings",
                       f"indices must be in [0, {self.num - 1}]: check the vocabulary size "
                       "(num_embeddings) against the largest token id")
        return np.take(w, idx, axis=0)

    def backward(self, g):
        (idx,) = self.saved_tensors
        return None, apply(EmbeddingBackward(self.num, self.padding_idx, self.by_freq), idx, g)


def _scatter_add_rows(num: int, flat: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """A [num, d] table of zeros with rows[i] added at row flat[i].

    When indices repeat (more rows than table entries: a small vocabulary, positions over a
    batch), sorting them and summing each run with reduceat is ~5x faster than np.add.at.
    """
    dw = np.zeros((num, rows.shape[1]), rows.dtype)
    if len(flat) <= num:
        np.add.at(dw, flat, rows)
        return dw
    order = np.argsort(flat, kind="stable")  # stable: each run sums in the original order
    sorted_idx = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
    dw[sorted_idx[starts]] = np.add.reduceat(rows[order], starts, axis=0)
    return dw


class EmbeddingBackward(Op):
    """d weight of embedding: a zero table with each g row added at its index."""

    name = "embedding_backward"

    def __init__(self, num: int, padding_idx: int | None, by_freq: bool = False) -> None:
        self.num, self.padding_idx, self.by_freq = num, padding_idx, by_freq

    def infer(self, idx, g):
        return (self.num, g.shape[-1]), g.dtype

    def saved(self, idx, g, out):
        return (Saved.input(0),)

    def forward(self, idx, g):
        d = g.shape[-1]
        flat = idx.reshape(-1)
        dw = _scatter_add_rows(self.num, flat, g.reshape(-1, d))
        if self.by_freq:  # each row's gradient divided by how often its index occurs
            counts = np.bincount(flat, minlength=self.num)
            dw /= np.maximum(counts, 1).astype(dw.dtype)[:, None]
        if self.padding_idx is not None:
            dw[self.padding_idx] = 0
        return dw

    def backward(self, gg):
        (idx,) = self.saved_tensors
        out = apply(Embedding(), idx, gg)
        if self.by_freq:
            from ..tensor import tensor

            counts = np.bincount(idx.data.reshape(-1), minlength=self.num)
            inv = tensor(1.0 / np.maximum(counts, 1)[idx.data], dtype=gg.dtype)
            out = out * inv.unsqueeze(-1)
        if self.padding_idx is not None:
            out = out * (idx != self.padding_idx).unsqueeze(-1)
        return None, out


def _check_indices(op: str, idx: np.ndarray, n: int, what: str, hint: str) -> None:
    """ShapeError (naming the worst index) if any index is outside [0, n)."""
    if idx.size == 0:
        return
    lo, hi = int(idx.min()), int(idx.max())
    if lo >= 0 and hi < n:
        return
    bad = hi if hi >= n else lo
    raise ShapeError(
        f"{op}: index {bad} is out of range for {what}={n} (max index {hi}, min index {lo})",
        op=op, operands=[("input", f"{format_shape(idx.shape)} {idx.dtype}")], hint=hint)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of weight [num_embeddings, dim] at the integer indices input; shape input + [dim].

    padding_idx's row gets no gradient; max_norm renormalizes the rows used, in place (as
    PyTorch); `sparse` is accepted, and the gradient is dense.
    """
    if padding_idx is not None:
        n = weight.shape[0]
        if type(n) is int and not -n <= padding_idx < n:
            raise ShapeError(f"embedding: padding_idx {padding_idx} is out of range for "
                             f"num_embeddings={n}", op="embedding")
        if padding_idx < 0:
            padding_idx += n
    if max_norm is not None and weight.data is not None and input.data is not None:
        _renorm_rows(input, weight, max_norm, norm_type)
    return apply(Embedding(padding_idx, scale_grad_by_freq), input, weight)


def _renorm_rows(input: Tensor, weight: Tensor, max_norm: float, norm_type: float) -> None:
    """PyTorch's embedding_renorm_: rows used whose norm exceeds max_norm are scaled down."""
    if input.dtype.category != 1:
        return  # the Embedding op raises the DTypeError
    _check_indices("embedding", input.data, weight.shape[0], "num_embeddings",
                   "indices must be smaller than num_embeddings")
    rows = np.unique(input.data)
    w = weight.data
    norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        w[rows[big]] *= (max_norm / (norms[big] + 1e-7)).astype(w.dtype)[:, None]
        weight._version[0] += 1


class OneHot(Op):
    name = "one_hot"
    differentiable = False

    def __init__(self, num_classes: int) -> None:
        self.num_classes = num_classes

    def infer(self, x):
        if x.dtype.category != 1:
            raise DTypeError(f"one_hot: input must hold integer class indices, got {x.dtype}",
                             op="one_hot", operands=[("input", describe(x))],
                             hint="convert with .long()")
        return tuple(x.shape) + (self.num_classes,), _dt.int64

    def forward(self, x):
        c = self.num_classes
        _check_indices("one_hot", x, c, "num_classes",
                       f"class indices must be in [0, {c - 1}]; pass a larger num_classes")
        out = np.zeros((x.size, c), np.int64)
        out[np.arange(x.size), x.reshape(-1)] = 1
        return out.reshape(x.shape + (c,))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding [..., num_classes]; num_classes=-1 takes max + 1 from the data."""
    if num_classes == -1:
        if tensor.data is None:
            raise ShapeError("one_hot: num_classes=-1 needs data to find the class count",
                             op="one_hot", operands=[("input", describe(tensor))],
                             hint="pass num_classes= explicitly on the meta device")
        if tensor.numel() == 0:
            raise ShapeError("one_hot: cannot infer num_classes from an empty tensor",
                             op="one_hot", hint="pass num_classes=")
        num_classes = int(tensor.data.max()) + 1
    return apply(OneHot(num_classes), tensor)


# ---- dropout ----------------------------------------------------------------------------
class Dropout(Op):
    """Zero each element with probability p, scale the rest by 1/(1-p); keeps a bool mask."""

    name = "dropout"

    def __init__(self, p: float, generator=None) -> None:
        self.p, self.generator = p, generator
        self.scale = 1.0 / (1.0 - p) if p < 1 else 0.0

    def infer(self, x):
        _need_float("dropout", x)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (Saved.new("mask", x.shape, _dt.bool_, DROPOUT_MASK),)

    def forward(self, x):
        r = np.asarray(get_rng(self.generator).random(x.shape, dtype=np.float32))
        mask = r >= self.p
        if x.dtype == np.float32:
            out = np.multiply(x, np.float32(self.scale), out=r)  # reuse the random buffer
        else:
            out = x * x.dtype.type(self.scale)
        out *= mask
        self.mask = mask
        return out

    def backward(self, g):
        (mask,) = self.saved_tensors
        return (_mask_scale(g, mask, self.scale),)


class MaskScale(Op):
    """g * mask * scale in one pass (dropout's backward)."""

    name = "dropout_backward"
    differentiable = False

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def infer(self, g, mask):
        return g.shape, g.dtype

    def forward(self, g, mask):
        out = np.multiply(g, mask, dtype=g.dtype)
        out *= g.dtype.type(self.scale)
        return out


def _mask_scale(g: Tensor, mask: Tensor, scale: float) -> Tensor:
    if _create_graph():
        return g * mask * scale
    return apply(MaskScale(scale), g, mask)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            generator=None) -> Tensor:
    """Zero elements with probability p and scale by 1/(1-p) (identity when not training).

    `inplace` is accepted for PyTorch compatibility; the result is always a new tensor.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    return apply(Dropout(float(p), generator), input)


# ---- losses -----------------------------------------------------------------------------
_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


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
        raise ShapeError(f"{op}: input must have a class dim ([N, C] or [C]), got a 0-d "
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
            raise ShapeError(f"{op}: weight {format_shape(w.shape)} must be 1-D with one "
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
        raise ShapeError(
            f"{op}: target class {int(bad.flat[0])} is out of range for {C} classes "
            f"(valid classes are 0..{C - 1}, or ignore_index={ignore_index})", op=op,
            operands=[("target", f"{format_shape(t2.shape)} {t2.dtype}")],
            hint="check the number of classes the model outputs against the labels")
    return valid, tt


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
        return kept + (Saved.new("lse", self.batch, _stat_dtype(x.dtype)),)

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
        lse = _lse_rows(x2)
        eps = self.eps
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.prob:
                wy = _smoothed(_rows(t).astype(cdt, copy=False), eps, C, w, cdt)
                loss = lse * wy.sum(axis=1) - np.einsum("ij,ij->i", wy, x2)
                denom = R
            else:
                valid, tt = _class_targets(self.name, t.reshape(-1), C, self.ii)
                wt = _row_weights(w, tt, valid, cdt)
                loss = (lse - x2[np.arange(R), tt]) * wt
                if eps:
                    if w is not None:
                        w1 = w.astype(cdt, copy=False)
                        smooth = lse * w1.sum() - x2 @ w1
                    else:
                        smooth = lse * C - x2.sum(axis=1)
                    if valid is not None:
                        smooth *= valid
                    loss = loss * (1 - eps) + smooth * (eps / C)
                denom = wt.sum()
            if self.reduction == "none":
                out = loss.reshape(self.batch)
            else:
                out = loss.sum()
                if self.reduction == "mean":
                    out = out / denom
        if self.keep:
            self.lse = lse.reshape(self.batch)
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
                gt = self._target_grad(g, x - lse.unsqueeze(self.cax), w)
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
        cdt = lse.dtype
        x2 = _rows(x)
        R, C = x2.shape
        lse2 = lse.reshape(-1, 1)
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
            a = wy.sum(axis=1) * scale
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
            for sl in _blocks(R, C):
                db = dx2[sl]
                np.subtract(x2[sl], lse2[sl], out=db)
                np.exp(db, out=db)
                db *= a[sl, None]
                if smooth is not None:
                    db -= (np.outer(smooth[sl], w1) if w is not None else smooth[sl, None])
            dx2[np.arange(R), tt] -= (1 - eps) * wt * scale
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
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got "
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
    _check_reduction("nll_loss", reduction)
    extra = (weight,) if weight is not None else ()
    return apply(NllLoss(ignore_index, reduction, weight is not None), input, target, *extra)


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
    raise ShapeError(f"{op}: input {format_shape(si)} and target {format_shape(st)} have "
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
    _check_reduction("mse_loss", reduction)
    _check_pair("mse_loss", input, target)
    return _reduce((input - target).square(), reduction)


def l1_loss(input: Tensor, target: Tensor, *, reduction: str = "mean") -> Tensor:
    """Mean absolute error; input and target must have the same shape."""
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
                raise ShapeError(f"{self.name}: {name} {format_shape(e.shape)} does not "
                                 f"broadcast to input {format_shape(x.shape)}", op=self.name,
                                 operands=[("input", describe(x)), (name, describe(e))])
        return x.shape, x.dtype

    def saved(self, x, y, *extra, out):
        return tuple(Saved.input(i) for i in range(2 + len(extra)))

    def forward(self, x, y, *extra):
        w = extra[0] if self.has_w else None
        pw = extra[-1] if self.has_pw else None
        sp = np.log1p(np.exp(-np.abs(x)))  # softplus(-x) = log1p(exp(-|x|)) + max(-x, 0)
        sp += np.maximum(-x, 0)
        if pw is not None:
            sp *= (pw - 1) * y + 1
        loss = x - x * y
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
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    extra = tuple(t for t in (weight, pos_weight) if t is not None)
    loss = apply(BCEWithLogits(weight is not None, pos_weight is not None), input, target,
                 *extra)
    return _reduce(loss, reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
                         reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities input in [0, 1] (logs clamped at -100)."""
    _check_reduction("binary_cross_entropy", reduction)
    _check_pair("binary_cross_entropy", input, target)
    loss = -(target * input.log().clamp(min=-100.0) +
             (1.0 - target) * (1.0 - input).log().clamp(min=-100.0))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ---- attention --------------------------------------------------------------------------
class Attention(Op):
    """softmax(q @ k^T * scale + mask) @ v, with dropout on the probabilities.

    Saves q, k, v, the probabilities and, with dropout, its bool mask and the dropped
    probabilities (the PV matmul's input): what Korthikanti et al. count for attention.
    """

    name = "scaled_dot_product_attention"

    def __init__(self, scale, is_causal: bool, dropout_p: float, mask_kind, generator) -> None:
        self.scale, self.is_causal, self.p = scale, is_causal, dropout_p
        self.mask_kind, self.generator = mask_kind, generator

    def infer(self, q, k, v, *mask):
        op = self.name
        ops = [("q", describe(q)), ("k", describe(k)), ("v", describe(v))]
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.ndim < 2:
                raise ShapeError(f"{op}: {name} must have at least 2 dims [..., L, E], got "
                                 f"{format_shape(t.shape)}", op=op, operands=ops)
            _need_float(op, t, name)
        if not (q.dtype is k.dtype is v.dtype):
            raise DTypeError(f"{op}: q, k, v have different dtypes ({q.dtype}, {k.dtype}, "
                             f"{v.dtype})", op=op, operands=ops, hint="cast them to one dtype")
        L, E = q.shape[-2], q.shape[-1]
        S, Ek = k.shape[-2], k.shape[-1]
        if not dims_equal(E, Ek):
            hint = None
            if dims_equal(S, E):
                hint = (f"k looks transposed ([..., E, S] = {format_shape(k.shape)}): pass k "
                        "as [..., S, E]; attention transposes it itself")
            elif dims_equal(L, Ek):
                hint = (f"q looks transposed ([..., E, L] = {format_shape(q.shape)}): use "
                        "q.transpose(-2, -1)")
            raise ShapeError(f"{op}: q's last dim ({E}) != k's last dim ({Ek})", op=op,
                             operands=ops, hint=hint)
        if not dims_equal(v.shape[-2], S):
            hint = None
            if dims_equal(v.shape[-1], S):
                hint = (f"v looks transposed ([..., Ev, S] = {format_shape(v.shape)}): pass v "
                        "as [..., S, Ev]")
            raise ShapeError(f"{op}: k has {S} positions (dim -2) but v has {v.shape[-2]}",
                             op=op, operands=ops, hint=hint)
        batch = broadcast_shapes(tuple(q.shape[:-2]), tuple(k.shape[:-2]), op, ("q", "k"))
        self.scores_shape = tuple(batch) + (L, S)
        out_batch = broadcast_shapes(tuple(batch), tuple(v.shape[:-2]), op, ("q", "v"))
        if mask:
            m = mask[0]
            if m.dtype.category == 1:
                raise DTypeError(f"{op}: attn_mask must be bool (True = attend) or float "
                                 f"(added to the scores), got {m.dtype}", op=op,
                                 operands=ops + [("attn_mask", describe(m))],
                                 hint="use mask.bool()")
            if m.dtype.category == 2 and m.dtype is not q.dtype:
                raise DTypeError(f"{op}: a float attn_mask must have q's dtype {q.dtype}, got "
                                 f"{m.dtype}", op=op, operands=ops + [("attn_mask",
                                                                       describe(m))])
            full = broadcast_shapes(tuple(m.shape), self.scores_shape, op,
                                    ("attn_mask", "scores"))
            if tuple(full) != self.scores_shape:
                raise ShapeError(
                    f"{op}: attn_mask {format_shape(m.shape)} does not broadcast to the "
                    f"scores {format_shape(self.scores_shape)} ([..., L, S])", op=op,
                    operands=ops + [("attn_mask", describe(m))])
        if self.scale is None:
            self.scale = 1.0 / math.sqrt(E) if type(E) is int else None
        self.need_mask_grad = bool(mask) and mask[0].requires_grad
        return tuple(out_batch) + (L, v.shape[-1]), q.dtype

    def saved(self, q, k, v, *mask, out):
        kept = (Saved.input(0, LAYER_INPUT), Saved.input(1, LAYER_INPUT),
                Saved.input(2, LAYER_INPUT))
        if mask:
            kept += (Saved.input(3),)
        kept += (Saved.new("probs", self.scores_shape, q.dtype, ATTENTION),)
        if self.p > 0:
            kept += (Saved.new("keep", self.scores_shape, _dt.bool_, DROPOUT_MASK),
                     Saved.new("dropped", self.scores_shape, q.dtype, ATTENTION))
        return kept

    def forward(self, q, k, v, mask=None):
        s = np.matmul(q, np.swapaxes(k, -1, -2))
        L, S = s.shape[-2:]
        if not (mask is None and s.size and kernels.softmax_rows(
                _as_rows(s, S), self.scale, L if self.is_causal else 0, True)):
            self._softmax_numpy(s, mask)  # else: scale, mask and softmax in one compiled pass
        self.probs = s
        if self.p > 0:
            r = np.asarray(get_rng(self.generator).random(s.shape, dtype=np.float32))
            keep = r >= self.p
            pd = np.multiply(s, keep, out=r if s.dtype == np.float32 else None)
            pd *= pd.dtype.type(1.0 / (1.0 - self.p) if self.p < 1 else 0.0)
            self.keep, self.dropped = keep, pd
            return np.matmul(pd, v)
        return np.matmul(s, v)

    def _softmax_numpy(self, s: np.ndarray, mask) -> None:
        """softmax(s * scale + mask) in place, in NumPy passes."""
        L, S = s.shape[-2:]
        s *= s.dtype.type(self.scale)  # scale the scores in place: no scaled copy of q
        if self.is_causal:
            np.minimum(s, _causal_bound(L, S, s.dtype), out=s)
        elif mask is not None:
            if mask.dtype == np.bool_:
                np.copyto(s, -np.inf, where=~mask)
            else:
                s += mask
        if s.size:
            _softmax_rows(_as_rows(s, S), _as_rows(s, S), False, zero_empty=True)

    def backward(self, g):
        saved = list(self.saved_tensors)
        q, k, v = saved[0], saved[1], saved[2]
        mask = saved[3] if self.mask_kind else None
        keep = saved[-2] if self.p > 0 else None
        p = saved[-3] if self.p > 0 else saved[-1]
        scale = self.scale if self.scale is not None else q.shape[-1] ** -0.5
        ks = 1.0 / (1.0 - self.p) if self.p < 1 else 0.0
        need = [n is not None for n in self.next[0::3]]
        create = _create_graph()
        g = _dense(g)
        if create:
            s = (q @ k.mT) * scale
            if self.is_causal:
                s = where(_causal_keep(s), s, float("-inf"))
            elif mask is not None:
                s = where(mask, s, float("-inf")) if mask.dtype is _dt.bool_ else s + mask
            p = softmax(s, -1)
        if keep is None:
            pd = p
        else:  # the dropped probabilities as saved, or as a function of p for grad of grad
            pd = _mask_scale(p, keep, ks) if create else saved[-1]
        dv = pd.mT @ g if need[2] else None
        dq = dk = dm = None
        if need[0] or need[1] or (len(need) > 3 and need[3]):
            dpd = g @ v.mT
            if create:
                dp = dpd * keep * ks if keep is not None else dpd
                ds_raw = p * (dp - (dp * p).sum(-1, keepdim=True))
                ds = ds_raw * scale
            else:
                ds = apply(SoftmaxBackward(p.ndim - 1, scale * (ks if keep is not None else 1)),
                           p, dpd, *((keep,) if keep is not None else ()))
                ds_raw = ds * (1.0 / scale) if self.need_mask_grad else None
            if need[0]:
                dq = ds @ k
            if need[1]:
                dk = ds.mT @ q
            if self.need_mask_grad:
                dm = ds_raw
        return (dq, dk, dv) + ((dm,) if self.mask_kind else ())


_causal_bounds: dict = {}


def _causal_bound(L: int, S: int, dtype) -> np.ndarray:
    """[L, S]: +inf where a causal query may look, -inf above the diagonal.

    np.minimum with it masks the scores in one broadcast pass (a masked copyto is ~10x
    slower), and sends +inf scores above the diagonal to -inf too, as masked_fill does.
    """
    key = (L, S, np.dtype(dtype))
    bound = _causal_bounds.get(key)
    if bound is None:
        if len(_causal_bounds) > 16:
            _causal_bounds.clear()
        bound = np.where(np.triu(np.ones((L, S), bool), 1), -np.inf, np.inf).astype(dtype)
        _causal_bounds[key] = bound
    return bound


def _causal_keep(s: Tensor) -> Tensor:
    """The [L, S] bool mask of positions a causal query may see (top-left aligned)."""
    L, S = s.shape[-2:]
    if s.data is None:
        return Tensor._make(None, (L, S), _dt.bool_, s.device)
    return Tensor._make(np.tril(np.ones((L, S), bool)), (L, S), _dt.bool_, s.device)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False,
                                 generator=None) -> Tensor:
    """softmax(q @ k^T * scale + mask) @ v (PyTorch semantics; bool mask: True = attend)."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa is not supported; "
                                  "repeat k and v over the head dim instead")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: pass either attn_mask or "
                         "is_causal=True, not both")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got "
                         f"{dropout_p}")
    op = Attention(scale, is_causal, float(dropout_p), None if attn_mask is None else
                   ("bool" if attn_mask.dtype is _dt.bool_ else "float"), generator)
    extra = (attn_mask,) if attn_mask is not None else ()
    return apply(op, query, key, value, *extra)


# ---- activations not in elementwise -----------------------------------------------------
class LeakyRelu(Op):
    name = "leaky_relu"

    def __init__(self, slope: float) -> None:
        self.slope = slope

    def infer(self, x):
        _need_float(self.name, x)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,) if self.slope > 0 else (X0_ACT,)

    def forward(self, x):
        return np.where(x > 0, x, x * x.dtype.type(self.slope))

    def backward(self, g):
        (t,) = self.saved_tensors
        return (where(t > 0, g, g * self.slope),)


class Elu(Op):
    name = "elu"

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha

    def infer(self, x):
        _need_float(self.name, x)
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,) if self.alpha > 0 else (X0_ACT,)

    def forward(self, x):
        return np.where(x > 0, x, np.expm1(np.minimum(x, 0)) * x.dtype.type(self.alpha))

    def backward(self, g):
        (t,) = self.saved_tensors
        if self.alpha > 0:  # t is the output: alpha * exp(x) = out + alpha where x <= 0
            return (where(t > 0, g, g * (t + self.alpha)),)
        return (where(t > 0, g, g * t.exp() * self.alpha),)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    return apply(LeakyRelu(negative_slope), input)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    return apply(Elu(alpha), input)


METHODS = ("softmax", "log_softmax")
__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm", "embedding", "dropout"]
