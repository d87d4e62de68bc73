"""Resampling over [N, C, *spatial]: interpolate, pixel (un)shuffle, unfold / fold.

All are composites of differentiable ops, so each has its backward and runs on meta:
linear modes are one constant [out, in] matrix per axis (separable), nearest modes an
index_select per axis, pixel shuffle a reshape and permute, unfold a grouped conv2d with
one-hot kernels and fold its transpose (the adjoint of unfold).
"""

from __future__ import annotations

import math

from ... import dtypes
from ...errors import ShapeError
from ...shape import format_shape
from ...tensor import Tensor, describe, tensor
from ..base import apply
from ..registry import public
from .conv2d import _ConvSpec, _pair, conv2d
from .convnd import ConvTranspose2d

_MODES = {"nearest": None, "nearest-exact": None, "area": None, "linear": 1, "bilinear": 2,
          "bicubic": 2, "trilinear": 3}


def _const(rows: list, like: Tensor) -> Tensor:
    """A constant [out, in] matrix (float64 values, as lists) in like's dtype and device."""
    t = tensor(rows, dtype=dtypes.float64, device=like.device)
    return t if t.dtype is like.dtype else t.to(like.dtype)


def _src(out: int, inp: int, scale: float | None, align_corners: bool, nearest: str | None):
    """Source coordinates of each output index along one axis (PyTorch's rules)."""
    if align_corners:
        f = (inp - 1) / (out - 1) if out > 1 else 0.0
        return [float(d) * f for d in range(out)]
    s = (1.0 / scale) if scale else inp / out
    if nearest == "nearest":
        return [float(math.floor(float(d) * s)) for d in range(out)]
    if nearest == "nearest-exact":
        return [float(math.floor((d + 0.5) * s)) for d in range(out)]
    return [max((d + 0.5) * s - 0.5, 0.0) for d in range(out)]


def _nearest_index(out: int, inp: int, scale, mode: str) -> list:
    """The source index each output index picks (nearest modes), clamped to the input."""
    return [int(min(v, inp - 1)) for v in _src(out, inp, scale, False, mode)]


def _linear_matrix(out: int, inp: int, scale, align_corners: bool) -> list:
    m = [[0.0] * inp for _ in range(out)]
    for r, x in enumerate(_src(out, inp, scale, align_corners, None)):
        i0 = min(math.floor(x), inp - 1)
        i1 = min(i0 + 1, inp - 1)
        lam = x - i0
        m[r][i0] += 1.0 - lam
        m[r][i1] += lam
    return m


def _cubic_matrix(out: int, inp: int, scale, align_corners: bool) -> list:
    """Bicubic weights along one axis: PyTorch's cubic convolution (A = -0.75), with the
    source coordinate unclamped and the four taps clamped to the edge."""
    a = -0.75

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    m = [[0.0] * inp for _ in range(out)]
    for r in range(out):
        if align_corners:
            src = float(r) * ((inp - 1) / (out - 1) if out > 1 else 0.0)
        else:
            src = (r + 0.5) * ((1.0 / scale) if scale else inp / out) - 0.5
        i0 = math.floor(src)
        t = src - i0
        for off, w in ((-1, far(t + 1)), (0, near(t)), (1, near(1 - t)), (2, far(2 - t))):
            m[r][min(max(i0 + off, 0), inp - 1)] += w
    return m


def _area_matrix(out: int, inp: int) -> list:
    """Adaptive average pooling along one axis: output i averages [i*n/o, ceil((i+1)*n/o))."""
    m = [[0.0] * inp for _ in range(out)]
    for i in range(out):
        lo, hi = (i * inp) // out, -((-(i + 1) * inp) // out)
        m[i][lo:hi] = [1.0 / (hi - lo)] * (hi - lo)
    return m


@public(sf=False, functional=True)
def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize [N, C, *spatial] to `size` or by `scale_factor` (PyTorch's F.interpolate)."""
    op = "interpolate"
    if mode not in _MODES:
        raise ShapeError(f"{op}: mode must be one of {', '.join(_MODES)}; got {mode!r}",
                         op=op)
    if antialias:
        raise ShapeError(f"{op}: antialias=True is not available")
    k = input.ndim - 2
    need = _MODES[mode]
    if k < 1 or (need is not None and k != need):
        layout = {1: "[N, C, L]", 2: "[N, C, H, W]", 3: "[N, C, D, H, W]"}
        want = layout.get(need, "[N, C, *spatial]")
        raise ShapeError(f"{op}: mode {mode!r} needs a {want} input, got "
                         f"{format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))],
                         hint="add a batch dim with x.unsqueeze(0)" if need and
                         input.ndim == need + 1 else None)
    if align_corners is not None and need is None:
        raise ShapeError(f"{op}: align_corners only applies to linear modes, not {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ShapeError(f"{op}: give exactly one of size and scale_factor")
    spatial = tuple(input.shape[2:])
    for d in spatial:
        if type(d) is not int:
            raise ShapeError(f"{op}: needs concrete spatial sizes, got "
                             f"{format_shape(input.shape)}", op=op,
                             hint="bind the symbolic dims to sizes")
    if size is not None:
        out = tuple(size) if isinstance(size, (tuple, list)) else (size,) * k
        scales = (None,) * k
    else:
        sf = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
            (scale_factor,) * k
        out = tuple(int(math.floor(n * s)) for n, s in zip(spatial, sf))
        scales = (None,) * k if recompute_scale_factor else tuple(float(s) for s in sf)
    if len(out) != k:
        raise ShapeError(f"{op}: size must have {k} entries for a {k}-D spatial input, got "
                         f"{size!r}")
    if mode == "area":
        from .pool import adaptive_avg_pool1d, adaptive_avg_pool2d

        if k == 1:
            return adaptive_avg_pool1d(input, out[0])
        if k == 2:
            return adaptive_avg_pool2d(input, out)
    if mode in ("nearest", "nearest-exact"):
        factors = _integer_factors(spatial, out, scales, mode)
        if factors is not None:
            return _repeat_nearest(input, factors)
    x = input
    for a in range(k):
        axis = 2 + a
        n, o = spatial[a], out[a]
        if n == o and need is None and scales[a] in (None, 1.0):
            continue
        if mode == "area":  # 3-D: average pooling is separable, one matrix per axis
            m = _const(_area_matrix(o, n), x)
        elif mode == "bicubic":
            m = _const(_cubic_matrix(o, n, scales[a], bool(align_corners)), x)
        elif need is None:  # nearest: pick source rows
            idx = tensor(_nearest_index(o, n, scales[a], mode), dtype=dtypes.int64,
                         device=x.device)
            x = x.index_select(axis, idx)
            continue
        else:
            m = _const(_linear_matrix(o, n, scales[a], bool(align_corners)), x)
        if axis == x.ndim - 1:
            x = x @ m.mT
        else:
            x = (x.movedim(axis, -1) @ m.mT).movedim(-1, axis)
    return x


def _integer_factors(spatial, out, scales, mode: str) -> tuple | None:
    """Per axis r where nearest picks source index i // r for output i (an integer upscale),
    else None."""
    factors = []
    for n, o, s in zip(spatial, out, scales):
        if n == 0 or o % n:
            return None
        r = o // n
        if _nearest_index(o, n, s, mode) != [i // r for i in range(o)]:
            return None
        factors.append(r)
    return tuple(factors)


def _repeat_nearest(x: Tensor, factors: tuple) -> Tensor:
    """Each input pixel repeated r times per axis: a broadcast copy forward, and backward a
    sum over each r-block (expand's gradient), no index arrays."""
    lead, spatial = tuple(x.shape[:2]), tuple(x.shape[2:])
    view, big, out = lead, lead, lead
    for n, r in zip(spatial, factors):
        view, big, out = view + (n, 1), big + (n, r), out + (n * r,)
    return x.reshape(view).expand(big).reshape(out)


@public(functional=True)
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """[*, C * r^2, H, W] -> [*, C, H * r, W * r] (sub-pixel convolution's rearrangement)."""
    op, r = "pixel_shuffle", int(upscale_factor)
    if input.ndim < 3:
        raise ShapeError(f"{op}: input must be [*, C * r^2, H, W], got "
                         f"{format_shape(input.shape)}", op=op)
    *lead, C, H, W = input.shape
    if type(C) is int and C % (r * r):
        raise ShapeError(f"{op}: channels {C} (dim -3 of {format_shape(input.shape)}) must be "
                         f"divisible by upscale_factor^2 = {r * r}", op=op,
                         operands=[("input", describe(input))])
    n = len(lead)
    x = input.reshape(*lead, C // (r * r), r, r, H, W)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, C // (r * r), H * r, W * r)


@public(functional=True)
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """[*, C, H * r, W * r] -> [*, C * r^2, H, W] (the inverse of pixel_shuffle)."""
    op, r = "pixel_unshuffle", int(downscale_factor)
    if input.ndim < 3:
        raise ShapeError(f"{op}: input must be [*, C, H, W], got {format_shape(input.shape)}",
                         op=op)
    *lead, C, H, W = input.shape
    for d, what in ((H, "height"), (W, "width")):
        if type(d) is int and d % r:
            raise ShapeError(f"{op}: {what} {d} must be divisible by downscale_factor {r}",
                             op=op, operands=[("input", describe(input))])
    n = len(lead)
    x = input.reshape(*lead, C, H // r, r, W // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, C * r * r, H // r, W // r)


def _one_hot_kernels(C: int, kh: int, kw: int, like: Tensor) -> Tensor:
    """[C * kh * kw, 1, kh, kw]: channel c*K + k picks kernel offset k of input channel c."""
    from ...factories import eye

    K = kh * kw
    return eye(K, dtype=like.dtype, device=like.device).reshape(K, 1, kh, kw).repeat(
        C, 1, 1, 1)


@public(sf=False, functional=True)
def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding blocks of [N, C, H, W] as columns: [N, C * kh * kw, L] (PyTorch's F.unfold)."""
    op = "unfold"
    if input.ndim not in (3, 4):
        raise ShapeError(f"{op}: input must be [N, C, H, W] or [C, H, W], got "
                         f"{format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    kh, kw = _pair(kernel_size, "kernel_size", op, 1)
    x = input.unsqueeze(0) if input.ndim == 3 else input
    if not x.dtype.is_floating_point:  # integer and bool blocks: copied exactly through float64
        x = x.to(dtypes.float64)
    C = x.shape[1]
    w = _one_hot_kernels(C, kh, kw, x)
    out = conv2d(x, w, None, stride, padding, dilation, groups=C)
    # sizes, not -1: a zero batch has no elements to infer the last dim from
    out = out.reshape(out.shape[0], C * kh * kw, out.shape[2] * out.shape[3])
    out = out if out.dtype == input.dtype else out.to(input.dtype)
    return out.squeeze(0) if input.ndim == 3 else out


@public(sf=False, functional=True)
def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum columns [N, C * kh * kw, L] back into [N, C, H, W] (the adjoint of unfold)."""
    op = "fold"
    if input.ndim not in (2, 3):
        raise ShapeError(f"{op}: input must be [N, C * kh * kw, L] or [C * kh * kw, L], got "
                         f"{format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    H, W = _pair(output_size, "output_size", op, 1)
    kh, kw = _pair(kernel_size, "kernel_size", op, 1)
    d, p, s = (_pair(dilation, "dilation", op, 1), _pair(padding, "padding", op, 0),
               _pair(stride, "stride", op, 1))
    x = input.unsqueeze(0) if input.ndim == 2 else input
    N, CK, L = x.shape
    K = kh * kw
    spec = _ConvSpec(s, (p[0], p[0], p[1], p[1]), d, 1)
    oh, ow = spec.out_hw(H, W, kh, kw)
    if type(CK) is int and CK % K:
        raise ShapeError(f"{op}: dim 1 ({CK}) must be divisible by kh * kw = {K}", op=op,
                         operands=[("input", describe(input))])
    if type(L) is int and oh * ow != L:
        raise ShapeError(f"{op}: {L} blocks given, but output_size {(H, W)} with this kernel, "
                         f"stride, padding and dilation has {oh} x {ow} = {oh * ow}", op=op,
                         operands=[("input", describe(input))])
    C = CK // K
    spec.groups = C
    w = _one_hot_kernels(C, kh, kw, x)
    out = apply(ConvTranspose2d(spec, (N, C, H, W)), x.reshape(N, CK, oh, ow), w)
    return out.squeeze(0) if input.ndim == 2 else out
