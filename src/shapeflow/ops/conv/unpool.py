"""max_unpool1d/2d/3d: a max pool's partial inverse, each value written back at its index.

The output is zeros with input[n, c, i] scattered to the flat spatial position indices[n, c,
i]; that is scatter along a flattened spatial dim, whose gradient (a gather at the same
indices) is scatter's own.
"""

from __future__ import annotations

import math

from ...errors import DTypeError, ShapeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..registry import public


def _tuple(v, n: int, name: str, op: str, low: int) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ShapeError(f"{op}: {name} must be an int or {n} ints, got {v!r}", op=op)
        v = tuple(int(a) for a in v)
    else:
        v = (int(v),) * n
    if min(v) < low:
        raise ShapeError(f"{op}: {name} must be >= {low}, got {v}", op=op)
    return v


def _unpool(op: str, n: int, input: Tensor, indices: Tensor, kernel_size, stride, padding,
            output_size) -> Tensor:
    operands = [("input", describe(input)), ("indices", describe(indices))]
    if input.ndim not in (n + 1, n + 2):
        raise ShapeError(f"{op}: input must be [N, C, *{n} spatial dims] or without N, got "
                         f"{format_shape(input.shape)}", op=op, operands=operands)
    if not indices.dtype.is_integer or indices.dtype.is_bool:
        raise DTypeError(f"{op}: indices must be int64, got {indices.dtype}", op=op,
                         operands=operands, hint="pass the indices a max pool returned")
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(f"{op}: indices {format_shape(indices.shape)} must have the input's "
                         f"shape {format_shape(input.shape)}", op=op, operands=operands)
    k = _tuple(kernel_size, n, "kernel_size", op, 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and not stride)
    s = k if empty else _tuple(stride, n, "stride", op, 1)
    p = _tuple(padding, n, "padding", op, 0)
    spatial = tuple(input.shape[-n:])
    default = tuple((spatial[i] - 1) * s[i] - 2 * p[i] + k[i] for i in range(n))
    if output_size is None:
        out = default
    else:
        out = tuple(int(a) for a in output_size)
        if len(out) == n + 2:
            out = out[2:]
        if len(out) != n:
            raise ShapeError(f"{op}: output_size must have {n} or {n + 2} entries, got "
                             f"{output_size!r}", op=op, operands=operands)
        for i in range(n):  # PyTorch's rule: within one stride of the default size
            if not default[i] - s[i] < out[i] < default[i] + s[i]:
                raise ShapeError(f"{op}: output_size {out} must be within a stride of the "
                                 f"default size {default}", op=op, operands=operands)
    for size in out:
        if size <= 0:
            raise ShapeError(f"{op}: the output size would be {out}", op=op, operands=operands)
    lead = tuple(input.shape[:-n])
    flat = math.prod(out)
    _check_range(op, indices, flat, operands)
    base = input.new_zeros(lead + (flat,))
    y = base.scatter(-1, indices.flatten(-n) if n > 1 else indices,
                     input.flatten(-n) if n > 1 else input)
    return y.reshape(*lead, *out)


def _check_range(op: str, indices: Tensor, flat: int, operands) -> None:
    """An index past the output plane is an error (PyTorch's), not a wrapped write."""
    data = indices._data
    if data is None or data.size == 0:
        return
    xp = indices.device.xp
    lo, hi = int(xp.min(data)), int(xp.max(data))
    if lo < 0 or hi >= flat:
        raise ShapeError(f"{op}: found an invalid max index {hi if hi >= flat else lo} "
                         f"(the output plane has {flat} elements)", op=op, operands=operands,
                         hint="the indices must come from the matching max pool")


@public(sf=False, functional=True)
def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Inverse of max_pool1d over [N, C, L] (or [C, L]): zeros except at the max indices."""
    return _unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


@public(sf=False, functional=True)
def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Inverse of max_pool2d over [N, C, H, W] (or [C, H, W]): zeros except at the max
    indices (flat h * W + w positions)."""
    return _unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


@public(sf=False, functional=True)
def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """Inverse of max_pool3d over [N, C, D, H, W] (or without N): zeros except at the max
    indices (flat d * H * W + h * W + w positions)."""
    return _unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
