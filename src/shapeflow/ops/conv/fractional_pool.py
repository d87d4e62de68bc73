"""fractional_max_pool2d / 3d: max over windows whose starts are drawn pseudo-randomly.

Graham's fractional max pooling: along an axis of size n pooled to o windows of size k, a
sample u in [0, 1) places window i (i < o - 1) at int((i + u) * alpha) - int(u * alpha),
alpha = (n - k) / (o - 1), computed in the input's dtype as PyTorch does, and the last window
at n - k. A non-differentiable primitive finds each window's flat argmax; the values are a
gather at those indices, whose gradient (a scatter-add) is gather's own.
"""

from __future__ import annotations

import itertools
import math

from ... import dtypes as _dt
from ...errors import ArgumentError, DTypeError, ShapeError, ShapeRuntimeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..registry import public

# which sample places each spatial axis: PyTorch's 2-D pool reads [..., 0] for the columns
# and [..., 1] for the rows, its 3-D pool [..., 0], [..., 1], [..., 2] for depth, rows, columns
_SAMPLE_OF_AXIS = {2: (1, 0), 3: (0, 1, 2)}


class FractionalMaxPoolIndices(Op):
    """The flat spatial index of each fractional window's max in x [N, C, *spatial]."""

    name = "fractional_max_pool_indices"
    differentiable = False

    def __init__(self, kernel: tuple, out: tuple) -> None:
        self.kernel, self.out = kernel, out

    def infer(self, x, samples):
        nd = len(self.kernel)
        op = f"fractional_max_pool{nd}d"
        ops = [("input", describe(x)), ("_random_samples", describe(samples))]
        N, C = x.shape[0], x.shape[1]
        if samples.dtype is not x.dtype:
            raise DTypeError(f"{op}: _random_samples is {samples.dtype} but input is "
                             f"{x.dtype}", op=op, operands=ops,
                             hint=f"draw them with dtype={x.dtype}")
        if tuple(samples.shape) != (N, C, nd):
            raise ShapeRuntimeError(f"{op}: _random_samples must be [N, C, {nd}] = "
                                    f"{format_shape((N, C, nd))}, got "
                                    f"{format_shape(samples.shape)}", op=op, operands=ops)
        for a, (n, k, o) in enumerate(zip(x.shape[2:], self.kernel, self.out)):
            if type(n) is int and o + k - 1 > n:
                raise ShapeRuntimeError(
                    f"{op}: output size {o} with kernel {k} needs an input of at least "
                    f"{o + k - 1} along spatial dim {a}, got {n}", op=op, operands=ops,
                    hint="use a smaller kernel_size or output_size")
        return (N, C) + self.out, _dt.int64

    def forward(self, x, u):
        xp = self.device.xp
        N, C = x.shape[:2]
        sizes = x.shape[2:]
        nd = len(sizes)
        strides = [math.prod(sizes[a + 1:]) for a in range(nd)]
        # each window's first flat position: the sum over axes of its start times the stride
        base = xp.zeros((N, C) + self.out, _dt.int64.np)
        for a in range(nd):
            col = _SAMPLE_OF_AXIS[nd][a]
            starts = _starts(xp, u[:, :, col], sizes[a], self.out[a], self.kernel[a])
            view = [N, C] + [1] * nd
            view[2 + a] = self.out[a]
            base += starts.reshape(view) * strides[a]
        flat = x.reshape(N, C, -1)
        base = base.reshape(N, C, -1)
        best = idx = None
        # taps in row-major order; a strictly greater value or a NaN takes the place (PyTorch)
        for tap in itertools.product(*(range(k) for k in self.kernel)):
            pos = base + sum(t * s for t, s in zip(tap, strides))
            v = xp.take_along_axis(flat, pos, axis=2)
            if best is None:
                best, idx = v, pos
                continue
            upd = (v > best) | xp.isnan(v)
            best = xp.where(upd, v, best)
            idx = xp.where(upd, pos, idx)
        return idx.reshape((N, C) + self.out)


def _starts(xp, u, n: int, o: int, k: int):
    """int64 [N, C, o]: the window starts along one axis for the samples u [N, C]."""
    last = xp.full(u.shape + (min(o, 1),), n - k, _dt.int64.np)
    if o <= 1:
        return last
    dt = u.dtype
    alpha = xp.asarray(n - k, dt) / xp.asarray(o - 1, dt)  # in the samples' dtype
    i = xp.arange(o - 1).astype(dt)
    u = u[..., None]
    first = ((i + u) * alpha).astype(_dt.int64.np) - (u * alpha).astype(_dt.int64.np)
    return xp.concatenate([first, last], axis=-1)


def _sizes(v, nd: int, name: str, op: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != nd:
            raise ShapeError(f"{op}: {name} must be a number or {nd} of them, got {v!r}", op=op)
        return tuple(v)
    return (v,) * nd


def _fractional(nd: int, input: Tensor, kernel_size, output_size, output_ratio,
                return_indices: bool, _random_samples: Tensor | None):
    op = f"fractional_max_pool{nd}d"
    if input.ndim not in (nd + 1, nd + 2):
        raise ShapeError(f"{op}: input must be [N, C, *{nd} spatial dims] or without N, got "
                         f"{format_shape(input.shape)}", op=op,
                         operands=[("input", describe(input))])
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: input must be floating point, got {input.dtype}", op=op,
                         operands=[("input", describe(input))], hint="call x.float() first")
    kernel = tuple(int(k) for k in _sizes(kernel_size, nd, "kernel_size", op))
    if min(kernel) < 1:
        raise ShapeError(f"{op}: kernel_size must be >= 1, got {kernel}", op=op)
    if output_size is None:
        if output_ratio is None:
            raise ArgumentError(f"{op} requires specifying either an output_size or an "
                                "output_ratio", op=op)
        ratio = _sizes(output_ratio, nd, "output_ratio", op)
        out = tuple(int(n * r) for n, r in zip(input.shape[-nd:], ratio))
    else:
        out = tuple(int(o) for o in _sizes(output_size, nd, "output_size", op))
    if min(out) < 0:
        raise ShapeError(f"{op}: output_size must be >= 0, got {out}", op=op)
    unbatched = input.ndim == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    samples = _random_samples
    if samples is None:
        from ...factories import rand

        samples = rand(x.shape[0], x.shape[1], nd, dtype=x.dtype, device=x.device)
    idx = apply(FractionalMaxPoolIndices(kernel, out), x, samples.detach())
    N, C = x.shape[0], x.shape[1]
    values = x.reshape(N, C, -1).gather(2, idx.reshape(N, C, -1)).reshape(idx.shape)
    if unbatched:
        values, idx = values.squeeze(0), idx.squeeze(0)
    return (values, idx) if return_indices else values


@public(sf=False, functional=True)
def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Max over [kh, kw] windows of [N, C, H, W] (or [C, H, W]) at pseudo-random starts giving
    output_size (or input size * output_ratio); _random_samples [N, C, 2] fixes them (its
    [..., 0] places the columns, [..., 1] the rows), else shapeflow's generator draws them."""
    return _fractional(2, input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples)


@public(sf=False, functional=True)
def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Max over [kt, kh, kw] windows of [N, C, T, H, W] (or without N) at pseudo-random starts;
    _random_samples [N, C, 3] fixes them ([..., 0] depth, [..., 1] rows, [..., 2] columns)."""
    return _fractional(3, input, kernel_size, output_size, output_ratio, return_indices,
                       _random_samples)
