"""1-D pools (the 2-D ones over [N, C, 1, L]) and adaptive pools (a fixed output size).

Adaptive windows follow PyTorch: output i covers [floor(i*n/o), ceil((i+1)*n/o)). When o
divides n these are plain pools; otherwise an average is a product with a constant [o, n]
averaging matrix per axis, and a max is a gather at indices found without the graph.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ShapeError
from ...shape import format_shape
from ...tensor import Tensor, describe, tensor
from ..registry import public
from .convnd import _single
from .pool2d import avg_pool2d, max_pool2d


def _need(op: str, x: Tensor, dims: tuple, layout: str) -> None:
    if x.ndim not in dims:
        raise ShapeError(f"{op}: input must be {layout} (or without N), got "
                         f"{format_shape(x.shape)}", op=op, operands=[("input", describe(x))],
                         hint="add a batch dim with x.unsqueeze(0)" if x.ndim < dims[0] else
                         None)


@public(functional=True)
def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """Max over kernel_size windows of [N, C, L] (or [C, L]); stride defaults to kernel."""
    op = "max_pool1d"
    _need(op, input, (2, 3), "[N, C, L]")
    k = _single(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _single(stride, "stride", op, 1)
    out = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", op, 0)),
                     (1, _single(dilation, "dilation", op, 1)), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


@public(functional=True)
def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Mean over kernel_size windows of [N, C, L] (or [C, L]); stride defaults to kernel."""
    op = "avg_pool1d"
    _need(op, input, (2, 3), "[N, C, L]")
    k = _single(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _single(stride, "stride", op, 1)
    out = avg_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, _single(padding, "padding", op, 0)),
                     ceil_mode, count_include_pad)
    return out.squeeze(-2)


def _bounds(n: int, o: int) -> list:
    return [((i * n) // o, -((-(i + 1) * n) // o)) for i in range(o)]


def _out_sizes(op: str, x: Tensor, output_size, k: int) -> tuple:
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != k:
            raise ShapeError(f"{op}: output_size must have {k} entries, got {output_size!r}")
        sizes = tuple(output_size)
    else:
        sizes = (output_size,) * k
    sizes = tuple(x.shape[x.ndim - k + i] if s is None else int(s) for i, s in enumerate(sizes))
    for s in sizes:
        if type(s) is int and s < 1:
            raise ShapeError(f"{op}: output_size must be positive, got {output_size!r}")
    return sizes


def _avg_matrix(n: int, o: int, dtype, device) -> Tensor:
    """The constant [o, n] matrix whose row i averages adaptive window i."""
    rows = []
    for a, b in _bounds(n, o):
        row = [0.0] * n
        row[a:b] = [1.0 / (b - a)] * (b - a)
        rows.append(row)
    return tensor(rows, dtype=dtype, device=device)


def _concrete(op: str, x: Tensor, dims: tuple) -> None:
    for d in dims:
        if type(d) is not int:
            raise ShapeError(f"{op}: this output size needs concrete input sizes, got "
                             f"{format_shape(x.shape)}", op=op,
                             operands=[("input", describe(x))],
                             hint="bind the symbolic dims to sizes, or use an output size that "
                             "divides the input")


@public(sf=False, functional=True)
def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average over adaptive windows of [N, C, H, W] (or [C, H, W]) to output_size."""
    op = "adaptive_avg_pool2d"
    _need(op, input, (3, 4), "[N, C, H, W]")
    oh, ow = _out_sizes(op, input, output_size, 2)
    H, W = input.shape[-2], input.shape[-1]
    if oh == 1 and ow == 1:
        return input.mean((-2, -1), keepdim=True)
    if type(H) is int and type(W) is int and H % oh == 0 and W % ow == 0:
        return avg_pool2d(input, (H // oh, W // ow))
    _concrete(op, input, (H, W))
    x = input if ow == W else input @ _avg_matrix(W, ow, input.dtype, input.device).mT
    return x if oh == H else _avg_matrix(H, oh, input.dtype, input.device) @ x


@public(functional=True)
def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average over adaptive windows of [N, C, L] (or [C, L]) to output_size."""
    op = "adaptive_avg_pool1d"
    _need(op, input, (2, 3), "[N, C, L]")
    (o,) = _out_sizes(op, input, output_size, 1)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, o)).squeeze(-2)


@public(sf=False, functional=True)
def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Max over adaptive windows of [N, C, H, W] (or [C, H, W]); indices are h * W + w."""
    op = "adaptive_max_pool2d"
    _need(op, input, (3, 4), "[N, C, H, W]")
    oh, ow = _out_sizes(op, input, output_size, 2)
    H, W = input.shape[-2], input.shape[-1]
    if type(H) is int and type(W) is int and H % oh == 0 and W % ow == 0:
        return max_pool2d(input, (H // oh, W // ow), return_indices=return_indices)
    _concrete(op, input, (H, W))
    lead = tuple(input.shape[:-2])
    if input._data is None:
        from ...factories import empty

        idx = empty(*lead, oh * ow, dtype=_dt.int64, device=input.device)
    else:
        x, xp = input._data, input.device.xp
        found = xp.empty(lead + (oh, ow), _dt.int64.np)
        for i, (a, b) in enumerate(_bounds(H, oh)):
            for j, (c, d) in enumerate(_bounds(W, ow)):
                win = x[..., a:b, c:d].reshape(lead + (-1,))
                pos = xp.argmax(win, axis=-1)
                found[..., i, j] = (a + pos // (d - c)) * W + c + pos % (d - c)
        idx = Tensor._make(found.reshape(lead + (oh * ow,)), lead + (oh * ow,), _dt.int64,
                           input.device)
    out = input.flatten(-2).gather(-1, idx).reshape(*lead, oh, ow)
    if return_indices:
        return out, idx.reshape(*lead, oh, ow)
    return out
