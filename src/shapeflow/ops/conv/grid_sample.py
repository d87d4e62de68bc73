"""grid_sample and affine_grid: an input read at the normalized positions of a grid.

Composite: each output point's taps (the 2**k corners for bilinear, the nearest one, the
4 x 4 bicubic neighbours) are gathered from the flattened input planes and weighted by
functions of the grid's fractional positions, so the input's gradient is gather's own and
the grid's flows through the weights, as PyTorch's. Out-of-range taps read zero ('zeros'),
or their coordinates are clipped ('border') or reflected ('reflection') first.
"""

from __future__ import annotations

from ...errors import DTypeError, ShapeError
from ...shape import format_shape
from ...tensor import Tensor, describe
from ..elementwise import where
from ..registry import public

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # the cubic convolution constant PyTorch's bicubic uses


def _check(op: str, input: Tensor, grid: Tensor, mode: str, padding_mode: str) -> int:
    operands = [("input", describe(input)), ("grid", describe(grid))]
    if mode not in _MODES:
        raise ShapeError(f"{op}: mode must be one of {_MODES}, got {mode!r}", op=op)
    if padding_mode not in _PADDINGS:
        raise ShapeError(f"{op}: padding_mode must be one of {_PADDINGS}, got "
                         f"{padding_mode!r}", op=op)
    if input.ndim not in (4, 5):
        raise ShapeError(f"{op}: input must be [N, C, H, W] or [N, C, D, H, W], got "
                         f"{format_shape(input.shape)}", op=op, operands=operands)
    k = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != k or grid.shape[0] != input.shape[0]:
        want = "[N, H_out, W_out, 2]" if k == 2 else "[N, D_out, H_out, W_out, 3]"
        raise ShapeError(f"{op}: grid must be {want} with the input's batch size, got "
                         f"{format_shape(grid.shape)}", op=op, operands=operands)
    if not input.dtype.is_floating_point or grid.dtype is not input.dtype:
        raise DTypeError(f"{op}: input and grid must be the same floating-point dtype, got "
                         f"{input.dtype} and {grid.dtype}", op=op, operands=operands)
    if mode == "bicubic" and k == 3:
        raise ShapeError(f"{op}: bicubic interpolation needs a 4-D input", op=op,
                         operands=operands)
    if k == 2 and any(s == 0 for s in input.shape[2:]) or k == 3 and \
            any(s == 0 for s in input.shape[2:]):
        raise ShapeError(f"{op}: the input's spatial dims must be non-empty", op=op,
                         operands=operands)
    return k


def _unnormalize(c: Tensor, size: int, align_corners: bool) -> Tensor:
    """[-1, 1] to pixel coordinates: corner pixels' centers (align_corners) or edges."""
    if align_corners:
        return (c + 1) * ((size - 1) / 2)
    return ((c + 1) * size - 1) / 2


def _reflect(c: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """c reflected into [twice_low / 2, twice_high / 2] as often as it takes."""
    if twice_low == twice_high:
        return c * 0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    c = (c - low).abs()
    extra = c.fmod(span)
    flips = (c / span).floor()
    even = flips.remainder(2) == 0
    return where(even, extra + low, span - extra + low)


def _pad_coord(c: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    if padding_mode == "border":
        return c.clamp(0, size - 1)
    if padding_mode == "reflection":
        c = (_reflect(c, 0, 2 * (size - 1)) if align_corners
             else _reflect(c, -1, 2 * size - 1))
        return c.clamp(0, size - 1)
    return c


class _Planes:
    """The input as [N, C, P] planes, and a gather of integer taps from them."""

    def __init__(self, input: Tensor, k: int) -> None:
        self.N, self.C = input.shape[0], input.shape[1]
        self.sizes = tuple(input.shape[2:])[::-1]  # (W, H[, D]): the grid's x, y[, z] order
        self.flat = input.reshape(self.N, self.C, -1)

    def tap(self, coords: list, out_points: int) -> Tensor:
        """input at the integer coordinates (float tensors [N, P], x first), zero outside."""
        valid = None
        index = None
        stride = 1
        for c, size in zip(coords, self.sizes):
            ok = (c >= 0) & (c <= size - 1)
            valid = ok if valid is None else valid & ok
            term = c.clamp(0, size - 1).long() * stride
            index = term if index is None else index + term
            stride *= size
        picked = self.flat.gather(2, index.unsqueeze(1).expand(self.N, self.C, out_points))
        return picked * valid.unsqueeze(1).to(picked.dtype)


def _sample(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
            align_corners: bool) -> Tensor:
    k = input.ndim - 2
    planes = _Planes(input, k)
    out_spatial = tuple(grid.shape[1:-1])
    P = 1
    for s in out_spatial:
        P *= s
    g = grid.reshape(planes.N, P, k)
    raw = [_unnormalize(g[..., a], planes.sizes[a], align_corners) for a in range(k)]
    if mode == "bicubic":
        out = _bicubic(planes, raw, P, padding_mode, align_corners)
    else:
        coords = [_pad_coord(c, s, padding_mode, align_corners)
                  for c, s in zip(raw, planes.sizes)]
        if mode == "nearest":
            out = planes.tap([c.round() for c in coords], P)
        else:
            out = _linear(planes, coords, P)
    return out.reshape(planes.N, planes.C, *out_spatial)


def _linear(planes: _Planes, coords: list, P: int) -> Tensor:
    """Sum over the 2**k corners of the tap times the opposite corner's box volume."""
    low = [c.floor() for c in coords]
    frac = [c - f for c, f in zip(coords, low)]
    out = None
    for corner in range(2 ** len(coords)):
        taps, weight = [], None
        for a, (f, t) in enumerate(zip(low, frac)):
            up = corner >> a & 1
            taps.append(f + 1 if up else f)
            w = t if up else 1 - t
            weight = w if weight is None else weight * w
        term = planes.tap(taps, P) * weight.unsqueeze(1)
        out = term if out is None else out + term
    return out


def _cubic_weights(t: Tensor) -> list:
    """The four cubic convolution weights of the taps at -1, 0, 1, 2 for fraction t."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bicubic(planes: _Planes, raw: list, P: int, padding_mode: str,
             align_corners: bool) -> Tensor:
    x, y = raw
    x0, y0 = x.floor(), y.floor()
    wx, wy = _cubic_weights(x - x0), _cubic_weights(y - y0)
    W, H = planes.sizes
    out = None
    for j in range(4):
        ty = _pad_coord(y0 + (j - 1), H, padding_mode, align_corners)
        row = None
        for i in range(4):
            tx = _pad_coord(x0 + (i - 1), W, padding_mode, align_corners)
            term = planes.tap([tx.detach(), ty.detach()], P) * wx[i].unsqueeze(1)
            row = term if row is None else row + term
        term = row * wy[j].unsqueeze(1)
        out = term if out is None else out + term
    return out


@public(sf=False, functional=True)
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """input [N, C, H, W] read at grid [N, H_out, W_out, 2] ((x, y) in [-1, 1]); 5-D input
    with grid [N, D_out, H_out, W_out, 3] for volumes. align_corners defaults to False."""
    _check("grid_sample", input, grid, mode, padding_mode)
    return _sample(input, grid, mode, padding_mode, bool(align_corners))


@public()
def grid_sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                 align_corners: bool) -> Tensor:
    """torch.grid_sampler: grid_sample with integer-coded mode (0 bilinear, 1 nearest, 2
    bicubic) and padding (0 zeros, 1 border, 2 reflection)."""
    op = "grid_sampler"
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise ShapeError(f"{op}: interpolation_mode and padding_mode must be 0, 1 or 2, got "
                         f"{interpolation_mode} and {padding_mode}", op=op)
    mode, pad = _MODES[interpolation_mode], _PADDINGS[padding_mode]
    _check(op, input, grid, mode, pad)
    return _sample(input, grid, mode, pad, bool(align_corners))


@public()
def grid_sampler_2d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """torch.grid_sampler_2d: grid_sampler over [N, C, H, W]."""
    if input.ndim != 4:
        raise ShapeError(f"grid_sampler_2d: input must be [N, C, H, W], got "
                         f"{format_shape(input.shape)}", op="grid_sampler_2d")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


@public()
def grid_sampler_3d(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> Tensor:
    """torch.grid_sampler_3d: grid_sampler over [N, C, D, H, W]."""
    if input.ndim != 5:
        raise ShapeError(f"grid_sampler_3d: input must be [N, C, D, H, W], got "
                         f"{format_shape(input.shape)}", op="grid_sampler_3d")
    return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def _base_axis(n: int, align_corners: bool, theta: Tensor) -> Tensor:
    """n points across [-1, 1] (pixel centers unless align_corners); one point is 0."""
    from ...factories import linspace, zeros

    if n <= 1:
        return zeros(max(n, 0), dtype=theta.dtype, device=theta.device)
    axis = linspace(-1.0, 1.0, n, dtype=theta.dtype, device=theta.device)
    return axis if align_corners else axis * ((n - 1) / n)


@public(sf=False, functional=True)
def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The grid [N, H, W, 2] (or [N, D, H, W, 3]) of theta [N, 2, 3] ([N, 3, 4]) applied
    to the output's normalized pixel positions, for grid_sample."""
    op = "affine_grid"
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise ShapeError(f"{op}: size must be (N, C, H, W) or (N, C, D, H, W), got {size}",
                         op=op)
    k = len(size) - 2
    if tuple(theta.shape) != (size[0], k, k + 1):
        raise ShapeError(f"{op}: theta must be [{size[0]}, {k}, {k + 1}] for size {size}, got "
                         f"{format_shape(theta.shape)}", op=op,
                         operands=[("theta", describe(theta))])
    if not theta.dtype.is_floating_point:
        raise DTypeError(f"{op}: theta must be floating point, got {theta.dtype}", op=op)
    from ...factories import ones
    from ..movement import stack

    spatial = size[2:]  # (H, W) or (D, H, W)
    axes = [_base_axis(n, bool(align_corners), theta) for n in spatial]
    parts = []
    for a in range(k):  # x varies along W (the last dim), y along H, z along D
        dim = k - 1 - a
        shape = [1] * k
        shape[dim] = spatial[dim]
        parts.append(axes[dim].reshape(*shape).expand(*spatial))
    parts.append(ones(*spatial, dtype=theta.dtype, device=theta.device))
    base = stack(parts, -1).reshape(1, -1, k + 1)
    grid = base @ theta.transpose(1, 2)
    return grid.reshape(size[0], *spatial, k)
