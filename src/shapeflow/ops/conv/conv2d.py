"""2-D convolution over [N, C, H, W] (im2col + one matmul per group).

Convolution is bilinear, so its three primitives close under differentiation:
conv2d(x, w) -> y, conv2d_input_backward(g, w) -> dx (a transposed convolution) and
conv2d_weight_backward(x, g) -> dw; each one's backward is written with the other two,
so grads of grads work.
"""

from __future__ import annotations

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import LAYER_INPUT, Op, Saved, apply
from ..registry import public
from . import conv2d_blocked as blocked
from . import conv2d_winograd as winograd

_X = Saved.input(0, LAYER_INPUT)
_W = Saved.input(1)

# the integer dtypes PyTorch's cpu convolution takes: the products and sums wrap in the
# dtype (NumPy's integer matmul through the same im2col, exact, no float round trip)
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8"})


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

    def args(self) -> tuple:
        """(stride, pads, dilation, groups): the geometry the kernel table's convs take."""
        return self.stride, self.pads, self.dilation, self.groups


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
            if not t.dtype.is_floating_point and t.dtype.name not in INT_DTYPES:
                raise DTypeError(f"{op}: {name} must be floating point or a signed integer "
                                 f"(or uint8), got {t.dtype}", op=op, operands=ops,
                                 hint=f"call {name}.float() first")
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
        return _conv_forward(self.device.kernels, self.spec, x, w, b)

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


def _conv_forward(kern, spec: _ConvSpec, x, w, b=None):
    """conv2d(x, w) + b on the kernel table `kern`: Winograd or column blocks for big convs,
    the whole-batch im2col for small ones."""
    crop = _crop(spec, x.shape, w.shape)
    if crop is not None:  # taps that read only padding: a smaller kernel, same output
        spec, rows, cols = crop
        w = kern.xp.ascontiguousarray(w[:, :, rows, cols])
    big = _blocked(spec, x, w.dtype, w.shape[0], w.shape[-2] * w.shape[-1])
    if big and winograd.applies(kern, spec, w.shape, x.dtype, w.dtype):
        return winograd.forward(kern, spec, x, w, b)
    if big:
        return blocked.forward(kern, spec, x, w, b)
    return kern.conv2d_im2col(x, w, b, *spec.args())


def _blocked(spec: _ConvSpec, x, w_dtype, out_channels: int, taps: int) -> bool:
    """Whether conv2d_blocked does it: one group, float32/float64 (its C kernels or NumPy's
    copies), at least SMALL_MACS of work (x's elements x out_channels x kernel taps); other
    cases keep the whole-batch im2col below, cheaper in Python calls for small convs (8x8
    maps of 16 channels)."""
    return spec.groups == 1 and x.dtype == w_dtype and x.dtype in blocked.DTYPES and \
        x.size * out_channels * taps >= SMALL_MACS


# input elements x out channels x taps below which conv2d keeps its whole-batch im2col
SMALL_MACS = 1 << 24


def _full_conv_spec(spec: _ConvSpec, kh: int, kw: int) -> _ConvSpec | None:
    """For stride 1, dx is g padded by d*(k-1) - pad and correlated with the flipped kernel:
    one im2col and matmul instead of k*k strided scatter-adds. None where that does not hold."""
    if spec.stride != (1, 1):
        return None
    eh, ew = spec.dilation[0] * (kh - 1), spec.dilation[1] * (kw - 1)
    pt, pb, pl, pr = spec.pads
    pads = (eh - pt, eh - pb, ew - pl, ew - pr)
    if min(pads) < 0:
        return None
    return _ConvSpec((1, 1), pads, spec.dilation, spec.groups)


def _crop(spec: _ConvSpec, x_shape, w_shape):
    """(spec, row slice, column slice) of the kernel taps that read real input at some
    output position, when some taps read only padding (a 3x3 kernel over a 1x1 or 2x2 image
    with padding 1: 1 or 4 of its 9 taps count); None when every tap counts."""
    H, W = x_shape[2], x_shape[3]
    kh, kw = w_shape[2], w_shape[3]
    if type(H) is not int or type(W) is not int or kh * kw == 1:
        return None
    oh, ow = spec.out_hw(H, W, kh, kw)
    pads, keep = [], []
    for size, k, o, s, d, lo in ((H, kh, oh, spec.stride[0], spec.dilation[0], spec.pads[0]),
                                 (W, kw, ow, spec.stride[1], spec.dilation[1], spec.pads[2])):
        # tap t reads rows o_ * s - lo + t * d for o_ in 0 .. o - 1: real when in [0, size)
        used = [t for t in range(k) if any(0 <= i * s - lo + t * d < size for i in range(o))]
        if not used:
            return None
        t0, t1 = used[0], used[-1] + 1
        top = lo - t0 * d
        bottom = (o - 1) * s + (t1 - t0 - 1) * d + 1 - size - top
        if top < 0 or bottom < 0:
            return None
        pads += [top, bottom]
        keep.append(slice(t0, t1))
    if keep[0] == slice(0, kh) and keep[1] == slice(0, kw):
        return None
    return _ConvSpec(spec.stride, tuple(pads), spec.dilation, spec.groups), keep[0], keep[1]


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
        return _input_grad(self.device.kernels, self.spec, self.x_shape, g, w)

    def backward(self, gg):
        saved = list(self.saved_tensors)
        g = saved.pop(0) if self.needs_grad(1) else None
        w = saved.pop(0) if self.needs_grad(0) else None
        d_g = apply(Conv2d(self.spec, False), gg, w) if w is not None else None
        d_w = apply(Conv2dWeightBackward(self.spec, self.w_shape), gg, g) \
            if g is not None else None
        return d_g, d_w


def _input_grad(kern, spec: _ConvSpec, x_shape, g, w):
    """dx of conv2d (the transposed convolution of g with w)."""
    crop = _crop(spec, x_shape, w.shape)
    if crop is not None:
        spec, rows, cols = crop
        w = kern.xp.ascontiguousarray(w[:, :, rows, cols])
    O, Cg, kh, kw = w.shape
    G = spec.groups
    full = _full_conv_spec(spec, kh, kw)
    # strided: gemm + col2im by blocks
    if full is None and _blocked(spec, g, w.dtype, Cg, kh * kw):
        return blocked.input_grad(kern, spec, x_shape, g, w)
    if full is not None:  # stride 1: a convolution of g with the flipped kernel
        wf = w.reshape(G, O // G, Cg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
        return _conv_forward(kern, full, g, kern.xp.ascontiguousarray(wf).reshape(
            G * Cg, O // G, kh, kw))
    return kern.conv2d_input_grad_col2im(g, w, x_shape, *spec.args())


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
        kern = self.device.kernels
        crop = _crop(self.spec, x.shape, self.w_shape)
        if crop is None:
            return _weight_grad(kern, self.spec, self.w_shape, x, g)
        spec, rows, cols = crop  # the taps that read only padding get zero gradient
        O, Cg, kh, kw = self.w_shape
        part = (O, Cg, rows.stop - rows.start, cols.stop - cols.start)
        dw = kern.xp.zeros(self.w_shape, g.dtype)
        dw[:, :, rows, cols] = _weight_grad(kern, spec, part, x, g)
        return dw

    def backward(self, gw):
        saved = list(self.saved_tensors)
        x = saved.pop(0) if self.needs_grad(1) else None
        g = saved.pop(0) if self.needs_grad(0) else None
        d_x = apply(Conv2dInputBackward(self.spec, self.x_shape), g, gw) if g is not None \
            else None
        d_g = apply(Conv2d(self.spec, False), x, gw) if x is not None else None
        return d_x, d_g


def _weight_grad(kern, spec: _ConvSpec, w_shape, x, g):
    """dw of conv2d: sum over the batch of g @ im2col(x)^T."""
    big = _blocked(spec, x, g.dtype, w_shape[0], w_shape[2] * w_shape[3])
    if big and winograd.applies(kern, spec, w_shape, x.dtype, g.dtype):
        return winograd.weight_grad(kern, spec, w_shape, x, g)
    if big:
        return blocked.weight_grad(kern, spec, w_shape, x, g)
    return kern.conv2d_weight_grad_im2col(x, g, w_shape, *spec.args())


@public(functional=True)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation, PyTorch's conv2d: input [N, C, H, W] or unbatched [C, H, W].

    padding: an int, a pair, 'valid' (none) or 'same' (output size = input size, stride 1).
    """
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight, bias = _autocast.lower(input, weight, bias)
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
