"""2-D convolution and pooling over [N, C, H, W] (im2col + one matmul per group).

Convolution is bilinear, so its three primitives close under differentiation:
conv2d(x, w) -> y, conv2d_input_backward(g, w) -> dx (a transposed convolution) and
conv2d_weight_backward(x, g) -> dw; each one's backward is written with the other two,
so grads of grads work. Pooling pairs up the same way (pool <-> its scatter).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..dtypes import from_numpy_dtype
from ..errors import DTypeError, ShapeError, ShapeRuntimeError
from ..shape import dims_equal, format_shape
from ..tensor import Tensor, describe
from .base import LAYER_INPUT, Op, Saved, apply

_X = Saved.input(0, LAYER_INPUT)
_W = Saved.input(1)


def _pair(v, name: str, op: str, low: int) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ShapeError(f"{op}: {name} must be an int or a pair, got {v!r}")
        v = (int(v[0]), int(v[1]))
    else:
        v = (int(v), int(v))
    if v[0] < low or v[1] < low:
        raise ShapeError(f"{op}: {name} must be >= {low}, got {v}")
    return v


def _out_size(n, pad_total: int, eff: int, stride: int):
    """floor((n + pads - eff) / stride) + 1; `//` so symbolic sizes work too."""
    return (n + pad_total - eff) // stride + 1


def _padded(x: np.ndarray, pads, fill=0.0, extra=(0, 0)) -> np.ndarray:
    """x [N, C, H, W] padded by (top, bottom, left, right) (+ extra bottom/right rows)."""
    pt, pb, pl, pr = pads
    pb, pr = pb + extra[0], pr + extra[1]
    if not (pt or pb or pl or pr):
        return x
    N, C, H, W = x.shape
    out = np.full((N, C, H + pt + pb, W + pl + pr), fill, x.dtype)
    out[:, :, pt:pt + H, pl:pl + W] = x
    return out


def _offsets(kh, kw, dil, stride, oh, ow):
    """For each kernel offset (i, j): the strided slices of the padded input it reads."""
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dil[0], j * dil[1]
            yield i * kw + j, (slice(r0, r0 + stride[0] * (oh - 1) + 1, stride[0]),
                               slice(c0, c0 + stride[1] * (ow - 1) + 1, stride[1]))


class _ConvSpec:
    """The attributes shared by conv2d and its two backward primitives."""

    __slots__ = ("stride", "pads", "dilation", "groups")

    def __init__(self, stride, pads, dilation, groups) -> None:
        self.stride, self.pads, self.dilation, self.groups = stride, pads, dilation, groups

    def out_hw(self, H, W, kh, kw):
        pt, pb, pl, pr = self.pads
        eh = self.dilation[0] * (kh - 1) + 1
        ew = self.dilation[1] * (kw - 1) + 1
        return _out_size(H, pt + pb, eh, self.stride[0]), _out_size(W, pl + pr, ew,
                                                                    self.stride[1])

    def cols(self, x: np.ndarray, kh: int, kw: int) -> np.ndarray:
        """im2col in [G, C/G * kh * kw, N * oh * ow] layout (one copy of the windows)."""
        N, C, H, W = x.shape
        G = self.groups
        oh, ow = self.out_hw(H, W, kh, kw)
        if kh == kw == 1 and self.stride == (1, 1) and not any(self.pads):
            return np.ascontiguousarray(x.transpose(1, 0, 2, 3)).reshape(G, C // G, N * H * W)
        xp = _padded(x, self.pads)
        dh, dw = self.dilation
        win = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
        win = win[:, :, : (oh - 1) * self.stride[0] + 1: self.stride[0],
                  : (ow - 1) * self.stride[1] + 1: self.stride[1], ::dh, ::dw]
        # [N, C, oh, ow, kh, kw] -> [C, kh, kw, N, oh, ow]
        return win.transpose(1, 4, 5, 0, 2, 3).reshape(G, C // G * kh * kw, N * oh * ow)

    def col2im(self, dcols: np.ndarray, x_shape, kh: int, kw: int) -> np.ndarray:
        """The adjoint of cols: add each column entry back to its input position."""
        N, C, H, W = x_shape
        oh, ow = self.out_hw(H, W, kh, kw)
        d6 = dcols.reshape(C, kh, kw, N, oh, ow)
        pt, pb, pl, pr = self.pads
        if kh == kw == 1 and self.stride == (1, 1) and not any(self.pads):
            return np.ascontiguousarray(d6.reshape(C, N, H, W).transpose(1, 0, 2, 3))
        dxp = np.zeros((N, C, H + pt + pb, W + pl + pr), dcols.dtype)
        for k, (rs, cs) in _offsets(kh, kw, self.dilation, self.stride, oh, ow):
            dxp[:, :, rs, cs] += d6[:, k // kw, k % kw].transpose(1, 0, 2, 3)
        if not any(self.pads):
            return dxp
        return dxp[:, :, pt:pt + H, pl:pl + W]


class Conv2d(Op):
    """Cross-correlation of x [N, C, H, W] with weight [O, C/groups, kh, kw], plus bias."""

    name = "conv2d"

    def __init__(self, spec: _ConvSpec, has_bias: bool) -> None:
        self.spec, self.has_bias = spec, has_bias

    def infer(self, x, w, *b):
        op, spec = self.name, self.spec
        ops = [("input", describe(x)), ("weight", describe(w))]
        if w.ndim != 4:
            raise ShapeRuntimeError(f"{op}: weight must be 4-D [out_channels, in_channels/groups, "
                                    f"kh, kw], got {format_shape(w.shape)}", op=op, operands=ops)
        if x.ndim != 4:
            raise ShapeRuntimeError(f"{op}: input must be [N, C, H, W] or [C, H, W], got "
                                    f"{format_shape(x.shape)}", op=op, operands=ops)
        for name, t in (("input", x), ("weight", w)):
            if t.dtype.category != 2:
                raise DTypeError(f"{op}: {name} must be floating point, got {t.dtype}", op=op,
                                 operands=ops, hint=f"call {name}.float() first")
        if x.dtype is not w.dtype:
            raise DTypeError(f"{op}: input is {x.dtype} but weight is {w.dtype}", op=op,
                             operands=ops, hint=f"cast the input with .to({w.dtype})")
        N, C, H, W = x.shape
        O, Cg, kh, kw = w.shape
        G = spec.groups
        if type(O) is int and O % G:
            raise ShapeRuntimeError(f"{op}: out_channels {O} is not divisible by groups {G}", op=op,
                                    operands=ops)
        if not dims_equal(C, Cg * G):
            hint = None
            if dims_equal(x.shape[3], Cg * G):
                hint = ("the input looks channels-last [N, H, W, C]: use "
                        "x.permute(0, 3, 1, 2)")
            raise ShapeRuntimeError(
                f"{op}: input has {C} channels but weight {format_shape(w.shape)} expects "
                f"{Cg * G} (in_channels/groups = {Cg}, groups = {G})", op=op, operands=ops,
                hint=hint)
        pt, pb, pl, pr = spec.pads
        eh, ew = spec.dilation[0] * (kh - 1) + 1, spec.dilation[1] * (kw - 1) + 1
        for size, pad, eff, what in ((H, pt + pb, eh, "height"), (W, pl + pr, ew, "width")):
            if type(size) is int and type(eff) is int and size + pad < eff:
                raise ShapeRuntimeError(
                    f"{op}: the kernel (effective {what} {eff}"
                    f"{' with dilation' if eff != (kh if what == 'height' else kw) else ''}) "
                    f"is larger than the padded input {what} {size + pad}", op=op,
                    operands=ops, hint="use a smaller kernel or dilation, or more padding")
        if b:
            bs = b[0].shape
            if len(bs) != 1 or not dims_equal(bs[0], O) or b[0].dtype is not x.dtype:
                raise ShapeRuntimeError(f"{op}: bias {format_shape(bs)} must be 1-D with "
                                        f"out_channels = {O} entries", op=op,
                                        operands=ops + [("bias", describe(b[0]))])
        oh, ow = spec.out_hw(H, W, kh, kw)
        self.x_shape, self.w_shape = tuple(x.shape), tuple(w.shape)
        return (N, O, oh, ow), x.dtype

    def saved(self, x, w, *b, out):
        return ((_X,) if w.requires_grad else ()) + ((_W,) if x.requires_grad else ())

    def forward(self, x, w, b=None):
        return _conv_forward(self.spec, x, w, b)

    def backward(self, g):
        saved = list(self.saved_tensors)
        x = saved.pop(0) if self.needs_grad(1) else None
        w = saved.pop(0) if self.needs_grad(0) else None
        gx = apply(Conv2dInputBackward(self.spec, self.x_shape), g, w) if w is not None \
            else None
        gw = apply(Conv2dWeightBackward(self.spec, self.w_shape), x, g) if x is not None \
            else None
        if self.has_bias:
            return gx, gw, g.sum((0, 2, 3))
        return gx, gw


def _conv_forward(spec: _ConvSpec, x, w, b=None) -> np.ndarray:
    N = x.shape[0]
    O, Cg, kh, kw = w.shape
    G = spec.groups
    oh, ow = spec.out_hw(x.shape[2], x.shape[3], kh, kw)
    cols = spec.cols(x, kh, kw)                                  # [G, Cg*kh*kw, N*oh*ow]
    out = np.matmul(w.reshape(G, O // G, Cg * kh * kw), cols)    # [G, O/G, N*oh*ow]
    out = np.ascontiguousarray(out.reshape(O, N, oh, ow).transpose(1, 0, 2, 3))
    if b is not None:
        out += b.reshape(O, 1, 1)
    return out


class Conv2dInputBackward(Op):
    """dx of conv2d: the transposed convolution of g [N, O, oh, ow] with weight."""

    name = "conv2d_input_backward"

    def __init__(self, spec: _ConvSpec, x_shape) -> None:
        self.spec, self.x_shape = spec, tuple(x_shape)

    def infer(self, g, w):
        self.w_shape = tuple(w.shape)
        return self.x_shape, g.dtype

    def saved(self, g, w, out):
        return ((Saved.input(0),) if w.requires_grad else ()) + \
            ((_W,) if g.requires_grad else ())

    def forward(self, g, w):
        O, Cg, kh, kw = w.shape
        G = self.spec.groups
        g_t = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(G, O // G, -1)
        dcols = np.matmul(w.reshape(G, O // G, Cg * kh * kw).transpose(0, 2, 1), g_t)
        return self.spec.col2im(dcols, self.x_shape, kh, kw)

    def backward(self, gg):
        saved = list(self.saved_tensors)
        g = saved.pop(0) if self.needs_grad(1) else None
        w = saved.pop(0) if self.needs_grad(0) else None
        d_g = apply(Conv2d(self.spec, False), gg, w) if w is not None else None
        d_w = apply(Conv2dWeightBackward(self.spec, self.w_shape), gg, g) \
            if g is not None else None
        return d_g, d_w


class Conv2dWeightBackward(Op):
    """dw of conv2d: sum over the batch of g @ im2col(x)^T, one matmul per group."""

    name = "conv2d_weight_backward"

    def __init__(self, spec: _ConvSpec, w_shape) -> None:
        self.spec, self.w_shape = spec, tuple(w_shape)

    def infer(self, x, g):
        self.x_shape = tuple(x.shape)
        return self.w_shape, g.dtype

    def saved(self, x, g, out):
        return ((_X,) if g.requires_grad else ()) + ((Saved.input(1),) if x.requires_grad
                                                     else ())

    def forward(self, x, g):
        O, Cg, kh, kw = self.w_shape
        G = self.spec.groups
        cols = self.spec.cols(x, kh, kw)                                  # [G, CKg, N*L]
        g_t = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(G, O // G, -1)
        dw = np.matmul(g_t, cols.transpose(0, 2, 1))                      # [G, O/G, CKg]
        return dw.reshape(self.w_shape)

    def backward(self, gw):
        saved = list(self.saved_tensors)
        x = saved.pop(0) if self.needs_grad(1) else None
        g = saved.pop(0) if self.needs_grad(0) else None
        d_x = apply(Conv2dInputBackward(self.spec, self.x_shape), g, gw) if g is not None \
            else None
        d_g = apply(Conv2d(self.spec, False), x, gw) if x is not None else None
        return d_x, d_g


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation, PyTorch's conv2d: input [N, C, H, W] or unbatched [C, H, W].

    padding: an int, a pair, 'valid' (none) or 'same' (output size = input size, stride 1).
    """
    op = "conv2d"
    stride = _pair(stride, "stride", op, 1)
    dilation = _pair(dilation, "dilation", op, 1)
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"conv2d: groups must be a positive int, got {groups!r}")
    if isinstance(padding, str):
        if padding == "valid":
            pads = (0, 0, 0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise ShapeError("conv2d: padding='same' needs stride 1")
            if weight.ndim != 4:
                raise ShapeRuntimeError(f"conv2d: weight must be 4-D, got "
                                        f"{format_shape(weight.shape)}", op=op)
            kh, kw = weight.shape[2], weight.shape[3]
            th, tw = dilation[0] * (kh - 1), dilation[1] * (kw - 1)
            pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)  # extra on the end
        else:
            raise ShapeError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got "
                             f"{padding!r}")
    else:
        ph, pw = _pair(padding, "padding", op, 0)
        pads = (ph, ph, pw, pw)
    if input.ndim not in (3, 4):
        raise ShapeRuntimeError(f"conv2d: input must be [N, C, H, W] or unbatched [C, H, W], got "
                                f"{format_shape(input.shape)}", op=op,
                                operands=[("input", describe(input)), ("weight", describe(weight))],
                                hint="add a batch dim with x.unsqueeze(0)" if input.ndim == 2 else
                                None)
    spec = _ConvSpec(stride, pads, dilation, groups)
    x = input.unsqueeze(0) if input.ndim == 3 else input
    out = apply(Conv2d(spec, bias is not None), x, weight, *((bias,) if bias is not None
                                                               else ()))
    return out.squeeze(0) if input.ndim == 3 else out


# ---- pooling ----------------------------------------------------------------------------
def _pool_size(n, k: int, s: int, p: int, d: int, ceil_mode: bool, op: str):
    eff = d * (k - 1) + 1
    if not ceil_mode:
        return _out_size(n, 2 * p, eff, s)
    if type(n) is not int:
        raise ShapeRuntimeError(f"{op}: ceil_mode=True needs concrete input sizes, got {n}", op=op,
                                hint="bind the symbolic dims to sizes")
    out = -((eff - n - 2 * p) // s) + 1  # ceil((n + 2p - eff) / s) + 1
    if (out - 1) * s >= n + p:  # the last window must start inside the input or left pad
        out -= 1
    return out


class _PoolSpec:
    __slots__ = ("k", "s", "p", "d", "ceil_mode", "x_shape", "out_shape", "extra")

    def __init__(self, k, s, p, d, ceil_mode) -> None:
        self.k, self.s, self.p, self.d, self.ceil_mode = k, s, p, d, ceil_mode

    def check(self, op: str, x) -> tuple:
        ops = [("input", describe(x))]
        if x.ndim != 4:
            raise ShapeRuntimeError(f"{op}: input must be [N, C, H, W] or [C, H, W], got "
                                    f"{format_shape(x.shape)}", op=op, operands=ops)
        # max pooling takes integers too, as PyTorch (no gradient flows to them)
        if x.dtype.category != 2 and not (op == "max_pool2d" and x.dtype.category == 1):
            raise DTypeError(f"{op}: input must be floating point, got {x.dtype}", op=op,
                             operands=ops, hint="call x.float() first")
        k, s, p, d = self.k, self.s, self.p, self.d
        for a in range(2):
            if p[a] > k[a] // 2:  # PyTorch's rule (on the kernel size, not the dilated one)
                raise ShapeRuntimeError(
                    f"{op}: padding {p[a]} must be at most half the kernel size {k[a]}",
                    op=op, operands=ops, hint=f"use padding <= {k[a] // 2}")
        N, C, H, W = x.shape
        oh = _pool_size(H, k[0], s[0], p[0], d[0], self.ceil_mode, op)
        ow = _pool_size(W, k[1], s[1], p[1], d[1], self.ceil_mode, op)
        for o, n, a in ((oh, H, 0), (ow, W, 1)):
            if type(o) is int and o <= 0:
                eff = d[a] * (k[a] - 1) + 1
                raise ShapeRuntimeError(
                    f"{op}: the kernel ({eff}) is larger than the padded input "
                    f"{'height' if a == 0 else 'width'} ({n + 2 * p[a]})", op=op,
                    operands=ops, hint="use a smaller kernel_size or more padding")
        self.x_shape, self.out_shape = tuple(x.shape), (N, C, oh, ow)
        self.extra = (0, 0)
        if type(H) is int and type(W) is int:  # rows past the input that ceil_mode reads
            self.extra = (max(0, (oh - 1) * s[0] + d[0] * (k[0] - 1) + 1 - H - 2 * p[0]),
                          max(0, (ow - 1) * s[1] + d[1] * (k[1] - 1) + 1 - W - 2 * p[1]))
        return self.out_shape

    def pads(self):
        return (self.p[0], self.p[0], self.p[1], self.p[1])

    def offsets(self):
        return _offsets(self.k[0], self.k[1], self.d, self.s, self.out_shape[2],
                        self.out_shape[3])

    def scatter_base(self, dtype) -> np.ndarray:
        N, C, H, W = self.x_shape
        return np.zeros((N, C, H + 2 * self.p[0] + self.extra[0],
                         W + 2 * self.p[1] + self.extra[1]), dtype)

    def crop(self, dxp: np.ndarray) -> np.ndarray:
        N, C, H, W = self.x_shape
        if not any(self.p) and not any(self.extra):
            return dxp
        return dxp[:, :, self.p[0]:self.p[0] + H, self.p[1]:self.p[1] + W]


def _index_dtype(k) -> np.dtype:
    n = k[0] * k[1]
    return np.dtype(np.uint8 if n <= 256 else np.int16 if n <= 32768 else np.int32)


class MaxPool2d(Op):
    """Max over windows; keeps the argmax offset within each window (1 byte per output)."""

    name = "max_pool2d"

    def __init__(self, spec: _PoolSpec, return_indices: bool) -> None:
        self.spec, self.return_indices = spec, return_indices

    def infer(self, x):
        return self.spec.check(self.name, x), x.dtype

    def saved(self, x, out):
        return (Saved.new("argmax", self.spec.out_shape, from_numpy_dtype(
            _index_dtype(self.spec.k))),)

    def forward(self, x):
        spec = self.spec
        low = -np.inf if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else \
            np.iinfo(x.dtype).min
        xp = _padded(x, spec.pads(), low, spec.extra)
        best = arg = None
        upd = None
        for k, (rs, cs) in spec.offsets():
            sl = xp[:, :, rs, cs]
            if best is None:
                best = np.array(sl)
                arg = np.zeros(best.shape, _index_dtype(spec.k))
                upd = np.empty(best.shape, bool)
                continue
            np.greater(sl, best, out=upd)
            upd |= np.isnan(sl)  # NaN propagates, as in PyTorch
            np.copyto(best, sl, where=upd)
            arg[upd] = k
        self.argmax = arg
        if self.return_indices:
            self.indices = _flat_indices(spec, arg)
        return best

    def backward(self, g):
        (arg,) = self.saved_tensors
        return (apply(MaxPoolBackward(self.spec), g, arg),)


def _flat_indices(spec: _PoolSpec, arg: np.ndarray) -> np.ndarray:
    """PyTorch's return_indices: the flat h * W + w position of each max in its input plane."""
    N, C, oh, ow = arg.shape
    W = spec.x_shape[3]
    ki, kj = np.divmod(arg.astype(np.int64), spec.k[1])
    rows = np.arange(oh).reshape(oh, 1) * spec.s[0] - spec.p[0] + ki * spec.d[0]
    cols = np.arange(ow) * spec.s[1] - spec.p[1] + kj * spec.d[1]
    return rows * W + cols


class MaxPoolBackward(Op):
    """dx of max_pool2d: each g entry added at its window's argmax."""

    name = "max_pool2d_backward"

    def __init__(self, spec: _PoolSpec) -> None:
        self.spec = spec

    def infer(self, g, arg):
        return self.spec.x_shape, g.dtype

    def saved(self, g, arg, out):
        return (Saved.input(1),)

    def forward(self, g, arg):
        spec = self.spec
        dxp = spec.scatter_base(g.dtype)
        hit = np.empty(arg.shape, bool)
        for k, (rs, cs) in spec.offsets():
            np.equal(arg, k, out=hit)
            view = dxp[:, :, rs, cs]
            np.add(view, g, out=view, where=hit)
        return spec.crop(dxp)

    def backward(self, gg):
        (arg,) = self.saved_tensors
        return apply(MaxPoolSelect(self.spec), gg, arg), None


class MaxPoolSelect(Op):
    """The adjoint of max_pool2d_backward: pick each window's argmax entry of a dx-shaped x."""

    name = "max_pool2d_select"

    def __init__(self, spec: _PoolSpec) -> None:
        self.spec = spec

    def infer(self, x, arg):
        return self.spec.out_shape, x.dtype

    def saved(self, x, arg, out):
        return (Saved.input(1),)

    def forward(self, x, arg):
        spec = self.spec
        xp = _padded(x, spec.pads(), 0.0, spec.extra)
        out = np.zeros(arg.shape, x.dtype)
        hit = np.empty(arg.shape, bool)
        for k, (rs, cs) in spec.offsets():
            np.equal(arg, k, out=hit)
            np.copyto(out, xp[:, :, rs, cs], where=hit)
        return out

    def backward(self, g):
        (arg,) = self.saved_tensors
        return apply(MaxPoolBackward(self.spec), g, arg), None


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over kernel_size windows of [N, C, H, W] (or [C, H, W]); stride defaults to kernel."""
    op = "max_pool2d"
    k = _pair(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _pair(stride, "stride", op, 1)
    spec = _PoolSpec(k, s, _pair(padding, "padding", op, 0), _pair(dilation, "dilation", op, 1),
                     ceil_mode)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    pool = MaxPool2d(spec, return_indices)
    out = apply(pool, x)
    if return_indices:
        from .. import dtypes as _dt

        data = pool.__dict__.pop("indices", None)  # not kept on the graph node
        idx = Tensor._make(data, out.shape, _dt.int64, out.device)
        if unbatched:
            return out.squeeze(0), idx.squeeze(0)
        return out, idx
    return out.squeeze(0) if unbatched else out


class AvgPool2d(Op):
    """Mean over windows (zero padding; divisor per PyTorch's count_include_pad rules)."""

    name = "avg_pool2d"

    def __init__(self, spec: _PoolSpec, count_include_pad: bool, divisor_override) -> None:
        self.spec, self.count_include_pad = spec, count_include_pad
        self.divisor_override = divisor_override

    def infer(self, x):
        return self.spec.check(self.name, x), x.dtype

    def forward(self, x):
        spec = self.spec
        xp = _padded(x, spec.pads(), 0.0, spec.extra)
        acc = None
        for _, (rs, cs) in spec.offsets():
            if acc is None:
                acc = np.array(xp[:, :, rs, cs])
            else:
                acc += xp[:, :, rs, cs]
        acc *= _inv_divisor(self, x.dtype)
        return acc

    def backward(self, g):
        return (apply(AvgPoolBackward(self), g),)


def _inv_divisor(op: AvgPool2d, dtype) -> np.ndarray:
    """1 / the number each window's sum is divided by, shape [oh, ow] (PyTorch's rules)."""
    spec = op.spec
    if op.divisor_override:
        return np.asarray(1.0 / op.divisor_override, dtype)
    _, _, H, W = spec.x_shape
    _, _, oh, ow = spec.out_shape
    counts = []
    for a, (n, o) in enumerate(((H, oh), (W, ow))):
        start = np.arange(o) * spec.s[a] - spec.p[a]
        end = np.minimum(start + spec.k[a], n + spec.p[a])
        size = end - start
        if not op.count_include_pad:
            size = np.minimum(end, n) - np.maximum(start, 0)
        counts.append(size)
    return (1.0 / np.outer(counts[0], counts[1])).astype(dtype)


class AvgPoolBackward(Op):
    """dx of avg_pool2d: g / divisor spread over each window (the adjoint of avg_pool2d)."""

    name = "avg_pool2d_backward"

    def __init__(self, fwd: AvgPool2d) -> None:
        self.f = fwd

    def infer(self, g):
        return self.f.spec.x_shape, g.dtype

    def forward(self, g):
        spec = self.f.spec
        gd = g * _inv_divisor(self.f, g.dtype)
        dxp = spec.scatter_base(g.dtype)
        for _, (rs, cs) in spec.offsets():
            dxp[:, :, rs, cs] += gd
        return spec.crop(dxp)

    def backward(self, gg):
        return (apply(AvgPool2d(self.f.spec, self.f.count_include_pad,
                                self.f.divisor_override), gg),)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over kernel_size windows of [N, C, H, W] (or [C, H, W]); stride defaults to kernel."""
    op = "avg_pool2d"
    k = _pair(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _pair(stride, "stride", op, 1)
    spec = _PoolSpec(k, s, _pair(padding, "padding", op, 0), (1, 1), ceil_mode)
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    out = apply(AvgPool2d(spec, count_include_pad, divisor_override), x)
    return out.squeeze(0) if unbatched else out


METHODS = ()
__all__ = ["conv2d", "max_pool2d", "avg_pool2d"]
