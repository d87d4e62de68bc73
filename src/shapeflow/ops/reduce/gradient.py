"""torch.gradient: the derivative of sampled values along each dim by central differences
(second order inside, first or second order at the edges), with unit, scalar or sampled
spacing, as NumPy's gradient. A composite of slicing and arithmetic, so differentiable."""

from __future__ import annotations

from ...errors import ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..registry import public


def _dims(x: Tensor, dim) -> list[int]:
    if dim is None:
        return list(range(x.ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    return [normalize_dim(d, x.ndim, "gradient") for d in dims]


def _spacings(spacing, dims: list[int], x: Tensor) -> list:
    if spacing is None:
        return [1.0] * len(dims)
    if isinstance(spacing, (int, float)) or (isinstance(spacing, Tensor) and spacing.ndim == 0):
        return [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise ShapeRuntimeError(f"gradient: expected spacing to be unspecified, a scalar or a "
                                f"list of length {len(dims)}, got a list of length "
                                f"{len(spacing)}", op="gradient",
                                operands=[("input", describe(x))])
    return spacing


def _along(x: Tensor, d: int, h, edge_order: int) -> Tensor:
    n = x.shape[d]

    def part(start: int, length: int) -> Tensor:
        return x.narrow(d, start, length)

    if isinstance(h, Tensor) and h.ndim == 1:  # sample coordinates along d
        if h.shape[0] != n:
            raise ShapeRuntimeError(f"gradient: the coordinates for dim {d} have {h.shape[0]} "
                                    f"values, the dim has {n}", op="gradient")
        view = tuple(-1 if i == d else 1 for i in range(x.ndim))
        dx = (h.narrow(0, 1, n - 1) - h.narrow(0, 0, n - 1)).reshape(view)
        a_, b_ = dx.narrow(d, 0, n - 2), dx.narrow(d, 1, n - 2)  # left, right widths inside
        inner = (a_ * a_ * part(2, n - 2) - b_ * b_ * part(0, n - 2)
                 + (b_ * b_ - a_ * a_) * part(1, n - 2)) / (a_ * b_ * (a_ + b_))
        d0, d1 = dx.narrow(d, 0, 1), dx.narrow(d, n - 2, 1)
        if edge_order == 1:
            first = (part(1, 1) - part(0, 1)) / d0
            last = (part(n - 1, 1) - part(n - 2, 1)) / d1
        else:
            e1, e2 = dx.narrow(d, 0, 1), dx.narrow(d, 1, 1)
            first = (-(2 * e1 + e2) / (e1 * (e1 + e2)) * part(0, 1)
                     + (e1 + e2) / (e1 * e2) * part(1, 1) - e1 / (e2 * (e1 + e2)) * part(2, 1))
            f1, f2 = dx.narrow(d, n - 3, 1), dx.narrow(d, n - 2, 1)
            last = (f2 / (f1 * (f1 + f2)) * part(n - 3, 1) - (f1 + f2) / (f1 * f2)
                    * part(n - 2, 1) + (2 * f2 + f1) / (f2 * (f1 + f2)) * part(n - 1, 1))
    else:
        inner = (part(2, n - 2) - part(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first = (part(1, 1) - part(0, 1)) / h
            last = (part(n - 1, 1) - part(n - 2, 1)) / h
        else:
            first = (-1.5 * part(0, 1) + 2.0 * part(1, 1) - 0.5 * part(2, 1)) / h
            last = (0.5 * part(n - 3, 1) - 2.0 * part(n - 2, 1) + 1.5 * part(n - 1, 1)) / h
    from ..movement import cat

    return cat([first, inner, last], d)


@public()
def gradient(input: Tensor, *, spacing=None, dim=None, edge_order: int = 1) -> tuple:  # noqa: A002
    """One tensor per dim: the estimated derivative of input along it (central differences
    inside, edge_order-accurate one-sided ones at the edges)."""
    if edge_order not in (1, 2):
        raise ShapeRuntimeError(f"gradient: only edge_order 1 and 2 are supported, got "
                                f"{edge_order}", op="gradient")
    dims = _dims(input, dim)
    hs = _spacings(spacing, dims, input)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise ShapeRuntimeError("gradient: expected each dimension size to be at least "
                                    f"edge_order+1 ({edge_order + 1}), dim {d} has "
                                    f"{input.shape[d]}", op="gradient",
                                    operands=[("input", describe(input))])
    x = input if input.dtype.is_floating_point or input.dtype.is_complex else input.float()
    return tuple(_along(x, d, h, edge_order) for d, h in zip(dims, hs))
