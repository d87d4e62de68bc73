"""conv1d, conv3d and the transposed convolutions, built on conv2d's three primitives.

conv1d is conv2d over [N, C, 1, L] (a view, no copy); a transposed convolution is exactly
conv2d's input-gradient primitive with the weight read as [C_in, C_out/groups, kh, kw],
so both inherit conv2d's kernels, backward and grad-of-grad. conv3d is a sum over its kd
depth taps of conv2d over [N * D_out, C, H, W] depth slices.
"""

from __future__ import annotations

from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ShapeError
from ...shape import dims_equal, format_shape
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import LAYER_INPUT, Saved, apply
from ..registry import public
from .conv2d import _W, Conv2dInputBackward, _ConvSpec, _pair, conv2d

_G = Saved.input(0, LAYER_INPUT)


def _single(v, name: str, op: str, low: int) -> int:
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ShapeError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    v = int(v)
    if v < low:
        raise ShapeError(f"{op}: {name} must be >= {low}, got {v}")
    return v


def _check_channels(op: str, x: Tensor, weight: Tensor, c_axis_w: int, groups: int,
                    layout: str, wdesc: str) -> None:
    """Input/weight dims and channels, with the channels-last hint worded for this op."""
    nd = len(layout.split(", ")) - 1  # spatial dims + channel
    operands = [("input", describe(x)), ("weight", describe(weight))]
    if weight.ndim != nd + 1:
        raise ShapeError(f"{op}: weight must be {nd + 1}-D {wdesc}, got "
                         f"{format_shape(weight.shape)}", op=op, operands=operands)
    if x.ndim not in (nd, nd + 1):
        raise ShapeError(f"{op}: input must be {layout} or unbatched (without N), got "
                         f"{format_shape(x.shape)}", op=op, operands=operands,
                         hint="add a batch dim with x.unsqueeze(0)" if x.ndim == nd - 1
                         else None)
    c = 0 if x.ndim == nd else 1
    want = weight.shape[0] if c_axis_w == 0 else weight.shape[1] * groups
    if not dims_equal(x.shape[c], want):
        hint = None
        if dims_equal(x.shape[-1], want):
            last = layout.replace("C, ", "").rstrip("]") + ", C]"
            hint = (f"the input looks channels-last {last}; {op} expects {layout}: "
                    f"use x.transpose(1, -1)" if nd == 2 else
                    f"the input looks channels-last {last}; {op} expects {layout}: "
                    f"use x.movedim(-1, 1)")
        raise ShapeError(f"{op}: input has {x.shape[c]} channels (dim {c}) but weight "
                         f"{format_shape(weight.shape)} expects {want}", op=op,
                         operands=operands, hint=hint)


@public(functional=True)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D cross-correlation over [N, C, L] (or [C, L]); weight [O, C/groups, k]."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight, bias = _autocast.lower(input, weight, bias)
    op = "conv1d"
    _check_channels(op, input, weight, 1, groups, "[N, C, L]", "[out_channels, "
                    "in_channels/groups, k]")
    s, d = _single(stride, "stride", op, 1), _single(dilation, "dilation", op, 1)
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", op, 0))
    x = input.unsqueeze(-2)
    out = conv2d(x, weight.unsqueeze(-2), bias, (1, s), pad, (1, d), groups)
    return out.squeeze(-2)


class ConvTranspose2d(Conv2dInputBackward):
    """The transposed convolution of x [N, C_in, H, W] with weight [C_in, C_out/g, kh, kw]."""

    name = "conv_transpose2d"

    def infer(self, x, w):
        op = self.name
        ops = [("input", describe(x)), ("weight", describe(w))]
        # PyTorch's cpu transposed convolution takes int64 and no other integer dtype
        if x.dtype is not w.dtype or not (x.dtype.is_floating_point or x.dtype.name == "int64"):
            from ...errors import DTypeError

            raise DTypeError(f"{op}: input ({x.dtype}) and weight ({w.dtype}) must be the "
                             "same floating-point dtype (or both int64)", op=op, operands=ops,
                             hint=f"cast the input with .to({w.dtype})")
        self.w_shape = tuple(w.shape)
        return self.x_shape, x.dtype

    def saved(self, x, w, out):
        return ((_G,) if w.requires_grad else ()) + ((_W,) if x.requires_grad else ())


@public(functional=True)
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """PyTorch's conv_transpose2d (the gradient of conv2d w.r.t. its input), [N, C, H, W]."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight, bias = _autocast.lower(input, weight, bias)
    op = "conv_transpose2d"
    _check_channels(op, input, weight, 0, groups, "[N, C, H, W]",
                    "[in_channels, out_channels/groups, kh, kw]")
    s, p = _pair(stride, "stride", op, 1), _pair(padding, "padding", op, 0)
    d, o = _pair(dilation, "dilation", op, 1), _pair(output_padding, "output_padding", op, 0)
    return _transpose(op, input, weight, bias, s, p, o, d, groups)


@public(functional=True)
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """PyTorch's conv_transpose1d over [N, C, L]; weight [C_in, C_out/groups, k]."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight, bias = _autocast.lower(input, weight, bias)
    op = "conv_transpose1d"
    _check_channels(op, input, weight, 0, groups, "[N, C, L]",
                    "[in_channels, out_channels/groups, k]")
    s, p = _single(stride, "stride", op, 1), _single(padding, "padding", op, 0)
    d = _single(dilation, "dilation", op, 1)
    o = _single(output_padding, "output_padding", op, 0)
    out = _transpose(op, input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, s), (0, p),
                     (0, o), (1, d), groups)
    return out.squeeze(-2)


def _transpose(op, input, weight, bias, s, p, o, d, groups) -> Tensor:
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"{op}: groups must be a positive int, got {groups!r}")
    for a in range(2):
        if o[a] >= s[a] and o[a] >= d[a]:
            raise ShapeError(f"{op}: output_padding {o[a]} must be smaller than either stride "
                             f"{s[a]} or dilation {d[a]}")
    x = input.unsqueeze(0) if input.ndim == 3 else input
    N, C, H, W = x.shape
    Cin, Cg, kh, kw = weight.shape
    if type(Cin) is int and Cin % groups:
        raise ShapeError(f"{op}: in_channels {Cin} is not divisible by groups {groups}", op=op,
                         operands=[("weight", describe(weight))])
    oh = (H - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + o[0] + 1
    ow = (W - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + o[1] + 1
    for size, what in ((oh, "height"), (ow, "width")):
        if type(size) is int and size <= 0:
            raise ShapeError(f"{op}: the output {what} would be {size}: padding is too large "
                             f"for the input {format_shape(input.shape)}", op=op,
                             operands=[("input", describe(input)), ("weight", describe(weight))])
    # output_padding >= stride (allowed when < dilation) adds whole strides: conv2d from
    # [oh, ow] has that many more output rows/cols, which read x's zero extension
    extra = (o[0] // s[0], o[1] // s[1])
    if any(extra):
        from ..movement import pad

        x = pad(x, (0, extra[1], 0, extra[0]))
    spec = _ConvSpec(s, (p[0], p[0], p[1], p[1]), d, groups)
    out = apply(ConvTranspose2d(spec, (N, Cg * groups, oh, ow)), x, weight)
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1)
    return out.squeeze(0) if input.ndim == 3 else out


def _triple(v, name: str, op: str, low: int) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != 3:
            raise ShapeError(f"{op}: {name} must be an int or a triple, got {v!r}")
        v = tuple(int(a) for a in v)
    else:
        v = (int(v),) * 3
    if min(v) < low:
        raise ShapeError(f"{op}: {name} must be >= {low}, got {v}")
    return v


@public(functional=True)
def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-D cross-correlation over [N, C, D, H, W] (or [C, D, H, W]); weight
    [O, C/groups, kd, kh, kw]."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight, bias = _autocast.lower(input, weight, bias)
    op = "conv3d"
    _check_channels(op, input, weight, 1, groups, "[N, C, D, H, W]",
                    "[out_channels, in_channels/groups, kd, kh, kw]")
    s, d = _triple(stride, "stride", op, 1), _triple(dilation, "dilation", op, 1)
    kd = weight.shape[2]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ShapeError(f"{op}: padding must be an int, a triple, 'valid' or 'same', got "
                             f"{padding!r}")
        if padding == "same" and s != (1, 1, 1):
            raise ShapeError(f"{op}: padding='same' needs stride 1")
        total = d[0] * (kd - 1) if padding == "same" else 0
        depth_pads, hw_pad = (total // 2, total - total // 2), padding
    else:
        p = _triple(padding, "padding", op, 0)
        depth_pads, hw_pad = (p[0], p[0]), (p[1], p[2])
    x = input.unsqueeze(0) if input.ndim == 4 else input
    if any(depth_pads):
        from ..movement import pad

        x = pad(x, (0, 0, 0, 0) + depth_pads)
    N, C, D, H, W = x.shape
    Do = (D - d[0] * (kd - 1) - 1) // s[0] + 1
    if type(Do) is int and Do < 1:
        raise ShapeError(f"{op}: the kernel depth (effective {d[0] * (kd - 1) + 1}) is larger "
                         f"than the padded input depth {D}", op=op,
                         operands=[("input", describe(input)), ("weight", describe(weight))])
    out = None
    for i in range(kd):  # one conv2d per depth tap over every output depth at once
        start = i * d[0]
        xi = x[:, :, start:start + s[0] * (Do - 1) + 1:s[0]].transpose(1, 2)
        yi = conv2d(xi.reshape(N * Do, C, H, W), weight[:, :, i], None, s[1:], hw_pad, d[1:],
                    groups)
        out = yi if out is None else out + yi
    out = out.reshape(N, Do, out.shape[1], out.shape[2], out.shape[3]).transpose(1, 2)
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1, 1)
    return out.squeeze(0) if input.ndim == 4 else out


@public(functional=True)
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """PyTorch's conv_transpose3d over [N, C, D, H, W]; weight [C_in, C_out/groups, kd, kh,
    kw]. Each depth tap i is conv_transpose2d of every input plane, landing at output depth
    d * stride + i * dilation (before padding is cropped)."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, weight, bias = _autocast.lower(input, weight, bias)
    op = "conv_transpose3d"
    _check_channels(op, input, weight, 0, groups, "[N, C, D, H, W]",
                    "[in_channels, out_channels/groups, kd, kh, kw]")
    s, p = _triple(stride, "stride", op, 1), _triple(padding, "padding", op, 0)
    d, o = _triple(dilation, "dilation", op, 1), _triple(output_padding, "output_padding", op, 0)
    if o[0] >= s[0] and o[0] >= d[0]:
        raise ShapeError(f"{op}: output_padding {o[0]} must be smaller than either stride "
                         f"{s[0]} or dilation {d[0]}")
    x = input.unsqueeze(0) if input.ndim == 4 else input
    N, C, D, H, W = x.shape
    kd = weight.shape[2]
    full = (D - 1) * s[0] + d[0] * (kd - 1) + 1  # the depth before cropping the padding
    od = full - 2 * p[0] + o[0]
    if type(od) is int and od <= 0:
        raise ShapeError(f"{op}: the output depth would be {od}: padding is too large for the "
                         f"input {format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input)), ("weight", describe(weight))])
    from ..movement import pad, stack

    planes = x.transpose(1, 2).reshape(N * D, C, H, W)
    out = None
    for i in range(kd):
        yi = _transpose(op, planes, weight[:, :, i], None, s[1:], p[1:], o[1:], d[1:], groups)
        yi = yi.reshape(N, D, yi.shape[1], yi.shape[2], yi.shape[3])
        if s[0] > 1:  # stride: s - 1 zero planes after each input plane
            zeros = yi.new_zeros((N, D, s[0] - 1) + tuple(yi.shape[2:]))
            yi = stack([yi] + [zeros[:, :, j] for j in range(s[0] - 1)], 2)
            yi = yi.reshape(N, D * s[0], *yi.shape[3:])[:, :(D - 1) * s[0] + 1]
        # the tap's planes start at depth i * dilation of the full (uncropped) output
        before = i * d[0]
        yi = pad(yi, (0, 0, 0, 0, 0, 0, before, full - before - yi.shape[1]))
        out = yi if out is None else out + yi
    if p[0] or o[0]:  # crop the padding; output_padding past it reads zeros
        out = pad(out, (0, 0, 0, 0, 0, 0, -p[0], o[0] - p[0]))
    out = out.transpose(1, 2)
    if bias is not None:
        out = out + bias.reshape(-1, 1, 1, 1)
    return out.squeeze(0) if input.ndim == 4 else out
