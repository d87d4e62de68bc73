"""3-D pools over [N, C, D, H, W], and adaptive_max_pool1d: each a separable composite.

A box window's max (or sum) is the max (sum) over its depth taps of the max (sum) over each
depth plane's [kh, kw] window, and PyTorch's average divisors are products of one count per
axis; so a 3-D pool is the 2-D pool over the H, W planes followed by a 1-D pool over depth
(the 2-D pool of [N, C, H*W, D] with a [1, kd] window), and inherits both pools' kernels,
backward and grad-of-grad. Scanning planes first and depth second keeps PyTorch's choice
among equal maxima (the first in d, h, w order).
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ShapeError
from ...shape import format_shape
from ...tensor import Tensor, describe, tensor
from ..elementwise import div as div_
from ..registry import public
from .convnd import _triple
from .pool import _need, _out_sizes, adaptive_avg_pool2d, adaptive_max_pool2d
from .pool2d import avg_pool2d, max_pool2d, window_count


def _need5(op: str, input: Tensor) -> tuple:
    """input as [N, C, D, H, W] and whether it came without N."""
    _need(op, input, (4, 5), "[N, C, D, H, W]")
    return (input.unsqueeze(0), True) if input.ndim == 4 else (input, False)


def _kernel_stride(op: str, kernel_size, stride) -> tuple:
    k = _triple(kernel_size, "kernel_size", op, 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and not stride)
    return k, (k if empty else _triple(stride, "stride", op, 1))


def _planes(x: Tensor) -> Tensor:
    """[N, C, D, H, W] -> [N, C*D, H, W]: every depth plane a channel of a 2-D pool."""
    N, C, D, H, W = x.shape
    return x.reshape(N, C * D, H, W)


def _depth_last(y: Tensor, N, C, D) -> Tensor:
    """[N, C*D, oh, ow] -> [N, C, oh*ow, D]: depth last, for a [1, kd] 2-D pool."""
    return y.reshape(N, C, D, y.shape[-2] * y.shape[-1]).transpose(-1, -2)


def _back(z: Tensor, oh, ow) -> Tensor:
    """[N, C, oh*ow, od] -> [N, C, od, oh, ow]."""
    N, C, _, od = z.shape
    return z.transpose(-1, -2).reshape(N, C, od, oh, ow)


def _join_indices(plane_idx: Tensor, depth_idx: Tensor, N, C, D, H, W, oh, ow) -> Tensor:
    """The flat d*H*W + h*W + w index of each max, from its plane's and its depth's index."""
    d = _back(depth_idx, oh, ow) % D  # the depth pool's index is row * D + d
    hw = plane_idx.reshape(N, C, D, oh, ow).gather(2, d)
    return d * (H * W) + hw


def _finish(out, idx, unbatched: bool, return_indices: bool):
    if unbatched:
        out = out.squeeze(0)
        idx = None if idx is None else idx.squeeze(0)
    return (out, idx) if return_indices else out


@public(functional=True)
def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over kernel_size windows of [N, C, D, H, W] (or without N); stride defaults to
    kernel_size; indices are flat d * H * W + h * W + w positions."""
    op = "max_pool3d"
    x, unbatched = _need5(op, input)
    k, s = _kernel_stride(op, kernel_size, stride)
    p, d = _triple(padding, "padding", op, 0), _triple(dilation, "dilation", op, 1)
    if p[0] > k[0] // 2:
        raise ShapeError(f"{op}: padding {p[0]} must be at most half the kernel size {k[0]}",
                         op=op, operands=[("input", describe(input))])
    N, C, D, H, W = x.shape
    planes = max_pool2d(_planes(x), k[1:], s[1:], p[1:], d[1:], ceil_mode, return_indices)
    y, plane_idx = planes if return_indices else (planes, None)
    oh, ow = y.shape[-2], y.shape[-1]
    depth = max_pool2d(_depth_last(y, N, C, D), (1, k[0]), (1, s[0]), (0, p[0]), (1, d[0]),
                       ceil_mode, return_indices)
    z, depth_idx = depth if return_indices else (depth, None)
    idx = (_join_indices(plane_idx, depth_idx, N, C, D, H, W, oh, ow) if return_indices
           else None)
    return _finish(_back(z, oh, ow), idx, unbatched, return_indices)


@public(sf=False, functional=True)
def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over kernel_size windows of [N, C, D, H, W] (or without N); stride defaults to
    kernel_size; divisor_override divides each window's sum by that number instead."""
    op = "avg_pool3d"
    x, unbatched = _need5(op, input)
    k, s = _kernel_stride(op, kernel_size, stride)
    p = _triple(padding, "padding", op, 0)
    if divisor_override is not None and int(divisor_override) == 0:
        raise ShapeError(f"{op}: divisor_override must not be zero", op=op)
    if p[0] > k[0] // 2:
        raise ShapeError(f"{op}: padding {p[0]} must be at most half the kernel size {k[0]}",
                         op=op, operands=[("input", describe(input))])
    N, C, D, H, W = x.shape
    # the sums when a divisor is given (1 divides by nothing), the per-axis means otherwise;
    # int64 takes the exact sums and one division toward zero by the whole 3-D divisor
    exact = x.dtype is _dt.int64
    div = 1 if divisor_override or exact else None
    y = avg_pool2d(_planes(x), k[1:], s[1:], p[1:], ceil_mode, count_include_pad, div)
    oh, ow = y.shape[-2], y.shape[-1]
    z = avg_pool2d(_depth_last(y, N, C, D), (1, k[0]), (1, s[0]), (0, p[0]), ceil_mode,
                   count_include_pad, div)
    out = _back(z, oh, ow)
    if exact:
        divisor = divisor_override or _divisors(out.shape[2:], (D, H, W), k, s, p,
                                                count_include_pad, x.device)
        out = div_(out, divisor, rounding_mode="trunc")
    elif divisor_override:
        out = out / divisor_override
    return _finish(out, None, unbatched, False)


def _divisors(out_sizes, sizes, k, s, p, count_include_pad: bool, device) -> Tensor:
    """int64 [od, oh, ow]: each 3-D window's divisor, the product of its per-axis counts."""
    counts = [[window_count(i, n, k[a], s[a], p[a], count_include_pad) for i in range(o)]
              for a, (o, n) in enumerate(zip(out_sizes, sizes))]
    d = tensor(counts[0], dtype=_dt.int64, device=device).reshape(-1, 1, 1)
    h = tensor(counts[1], dtype=_dt.int64, device=device).reshape(1, -1, 1)
    w = tensor(counts[2], dtype=_dt.int64, device=device).reshape(1, 1, -1)
    return d * h * w


@public(sf=False, functional=True)
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average over adaptive windows of [N, C, D, H, W] (or without N) to output_size
    (an int or a triple; None keeps that dim's size)."""
    op = "adaptive_avg_pool3d"
    x, unbatched = _need5(op, input)
    od, oh, ow = _out_sizes(op, x, output_size, 3)
    N, C, D, H, W = x.shape
    y = adaptive_avg_pool2d(_planes(x), (oh, ow))
    z = adaptive_avg_pool2d(_depth_last(y, N, C, D), (oh * ow, od))
    return _finish(_back(z, oh, ow), None, unbatched, False)


@public(sf=False, functional=True)
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive windows of [N, C, D, H, W] (or without N); indices are flat
    d * H * W + h * W + w positions."""
    op = "adaptive_max_pool3d"
    x, unbatched = _need5(op, input)
    od, oh, ow = _out_sizes(op, x, output_size, 3)
    N, C, D, H, W = x.shape
    planes = adaptive_max_pool2d(_planes(x), (oh, ow), return_indices)
    y, plane_idx = planes if return_indices else (planes, None)
    depth = adaptive_max_pool2d(_depth_last(y, N, C, D), (oh * ow, od), return_indices)
    z, depth_idx = depth if return_indices else (depth, None)
    idx = (_join_indices(plane_idx, depth_idx, N, C, D, H, W, oh, ow) if return_indices
           else None)
    return _finish(_back(z, oh, ow), idx, unbatched, return_indices)


@public(sf=False, functional=True)
def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive windows of [N, C, L] (or [C, L]); indices are positions in L."""
    op = "adaptive_max_pool1d"
    _need(op, input, (2, 3), "[N, C, L]")
    if input.ndim == 2 and input.shape[-1] == 0:
        raise ShapeError(f"{op}: input must be non-empty, got {format_shape(input.shape)}",
                         op=op, operands=[("input", describe(input))])
    (o,) = _out_sizes(op, input, output_size, 1)
    out = adaptive_max_pool2d(input.unsqueeze(-2), (1, o), return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)  # h is 0: h * L + l is l
    return out.squeeze(-2)
