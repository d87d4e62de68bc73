"""2-D max and average pooling over [N, C, H, W]: each pool pairs with its scatter (adjoint)."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..base import Op, Saved, apply
from ..registry import public
from .conv2d import _offsets, _out_size, _pair


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
        # max pooling takes integers too, average pooling int64, as PyTorch (no gradient
        # flows to them)
        if not x.dtype.is_floating_point and not (
                x.dtype.is_integer if op == "max_pool2d" else x.dtype is _dt.int64):
            raise DTypeError(f"{op}: input must be floating point"
                             f"{'' if op == 'max_pool2d' else ' or int64'}, got {x.dtype}",
                             op=op, operands=ops, hint="call x.float() first")
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

    def scatter_base(self, xp, dtype):
        N, C, H, W = self.x_shape
        return xp.zeros((N, C, H + 2 * self.p[0] + self.extra[0],
                         W + 2 * self.p[1] + self.extra[1]), dtype)

    def crop(self, dxp):
        N, C, H, W = self.x_shape
        if not any(self.p) and not any(self.extra):
            return dxp
        return dxp[:, :, self.p[0]:self.p[0] + H, self.p[1]:self.p[1] + W]


def _index_dtype(k) -> _dt.DType:
    """The narrowest integer that holds a window's offset (1 byte up to 16 x 16)."""
    n = k[0] * k[1]
    return _dt.uint8 if n <= 256 else _dt.int16 if n <= 32768 else _dt.int32


class MaxPool2d(Op):
    """Max over windows; keeps the argmax offset within each window (1 byte per output)."""

    name = "max_pool2d"

    def __init__(self, spec: _PoolSpec, return_indices: bool) -> None:
        self.spec, self.return_indices = spec, return_indices

    def infer(self, x):
        return self.spec.check(self.name, x), x.dtype

    def saved(self, x, out):
        return (Saved.new("argmax", self.spec.out_shape, _index_dtype(self.spec.k)),)

    def forward(self, x):
        spec = self.spec
        xp = self.device.xp
        low = -float("inf") if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else \
            xp.iinfo(x.dtype).min
        xpad = self.device.kernels.pad2d(x, spec.pads(), low, spec.extra)
        best = arg = None
        upd = None
        for k, (rs, cs) in spec.offsets():
            sl = xpad[:, :, rs, cs]
            if best is None:
                best = xp.array(sl)
                arg = xp.zeros(best.shape, _index_dtype(spec.k).np)
                upd = xp.empty(best.shape, bool)
                continue
            xp.greater(sl, best, out=upd)
            upd |= xp.isnan(sl)  # NaN propagates, as in PyTorch
            xp.copyto(best, sl, where=upd)
            arg[upd] = k
        self.argmax = arg
        if self.return_indices:
            self.indices = _flat_indices(xp, spec, arg)
        return best

    def backward(self, g):
        (arg,) = self.saved_tensors
        return (apply(MaxPoolBackward(self.spec), g, arg),)


def _flat_indices(xp, spec: _PoolSpec, arg):
    """PyTorch's return_indices: the flat h * W + w position of each max in its input plane."""
    N, C, oh, ow = arg.shape
    W = spec.x_shape[3]
    ki, kj = xp.divmod(arg.astype(_dt.int64.np), spec.k[1])
    rows = xp.arange(oh).reshape(oh, 1) * spec.s[0] - spec.p[0] + ki * spec.d[0]
    cols = xp.arange(ow) * spec.s[1] - spec.p[1] + kj * spec.d[1]
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
        xp = self.device.xp
        dxp = spec.scatter_base(xp, g.dtype)
        hit = xp.empty(arg.shape, bool)
        for k, (rs, cs) in spec.offsets():
            xp.equal(arg, k, out=hit)
            view = dxp[:, :, rs, cs]
            xp.add(view, g, out=view, where=hit)
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
        xp = self.device.xp
        xpad = self.device.kernels.pad2d(x, spec.pads(), 0.0, spec.extra)
        out = xp.zeros(arg.shape, x.dtype)
        hit = xp.empty(arg.shape, bool)
        for k, (rs, cs) in spec.offsets():
            xp.equal(arg, k, out=hit)
            xp.copyto(out, xpad[:, :, rs, cs], where=hit)
        return out

    def backward(self, g):
        (arg,) = self.saved_tensors
        return apply(MaxPoolBackward(self.spec), g, arg), None


@public(functional=True)
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
        xp = self.device.xp
        xpad = self.device.kernels.pad2d(x, spec.pads(), 0.0, spec.extra)
        acc = None
        for _, (rs, cs) in spec.offsets():
            if acc is None:
                acc = xp.array(xpad[:, :, rs, cs])
            else:
                acc += xpad[:, :, rs, cs]
        if x.dtype.kind in "iu":  # int64: the exact sum divided as C does (toward zero)
            return _trunc_div(xp, acc, _divisor(xp, self))
        acc *= _inv_divisor(xp, self, x.dtype)
        return acc

    def backward(self, g):
        return (apply(AvgPoolBackward(self), g),)


def _inv_divisor(xp, op: AvgPool2d, dtype):
    """1 / the number each window's sum is divided by, shape [oh, ow] (PyTorch's rules)."""
    if op.divisor_override:
        return xp.asarray(1.0 / op.divisor_override, dtype)
    return (1.0 / _divisor(xp, op)).astype(dtype)


def _trunc_div(xp, a, d):
    """a / d rounded toward zero in a's integer dtype (floor division, then one step back
    toward zero where it rounded a negative quotient down)."""
    q = a // d
    q += ((a - q * d) != 0) & ((a < 0) != (d < 0))
    return q


def window_count(i: int, n: int, k: int, s: int, p: int, count_include_pad: bool) -> int:
    """The divisor of window i along one axis of size n (PyTorch's rules, as `_divisor`)."""
    start = i * s - p
    end = min(start + k, n + p)
    return min(end, n) - max(start, 0) if not count_include_pad else end - start


def _divisor(xp, op: AvgPool2d):
    """The number each window's sum is divided by: an int, or int64 [oh, ow]."""
    spec = op.spec
    if op.divisor_override:
        return int(op.divisor_override)
    _, _, H, W = spec.x_shape
    _, _, oh, ow = spec.out_shape
    counts = []
    for a, (n, o) in enumerate(((H, oh), (W, ow))):
        start = xp.arange(o) * spec.s[a] - spec.p[a]
        end = xp.minimum(start + spec.k[a], n + spec.p[a])
        size = end - start
        if not op.count_include_pad:
            size = xp.minimum(end, n) - xp.maximum(start, 0)
        counts.append(size)
    return xp.outer(counts[0], counts[1])


class AvgPoolBackward(Op):
    """dx of avg_pool2d: g / divisor spread over each window (the adjoint of avg_pool2d)."""

    name = "avg_pool2d_backward"

    def __init__(self, fwd: AvgPool2d) -> None:
        self.f = fwd

    def infer(self, g):
        return self.f.spec.x_shape, g.dtype

    def forward(self, g):
        spec = self.f.spec
        xp = self.device.xp
        gd = g * _inv_divisor(xp, self.f, g.dtype)
        dxp = spec.scatter_base(xp, g.dtype)
        for _, (rs, cs) in spec.offsets():
            dxp[:, :, rs, cs] += gd
        return spec.crop(dxp)

    def backward(self, gg):
        return (apply(AvgPool2d(self.f.spec, self.f.count_include_pad,
                                self.f.divisor_override), gg),)


@public(functional=True)
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
