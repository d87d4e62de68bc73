"""The trapezoidal rule along a dim: trapezoid (and its old name trapz) and
cumulative_trapezoid, with unit, scalar or sampled spacing, as PyTorch computes them.

Composites of slicing, arithmetic and sum/cumsum: gradients and meta shapes come from those.
"""

from __future__ import annotations

from ...errors import ArgumentError, ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..registry import public


def _spacing(y: Tensor, x: Tensor, d: int, op: str) -> Tensor:
    """The widths x[i+1] - x[i] along d (a 1-d x lies along d)."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ShapeRuntimeError(f"{op}: there must be one `x` value for each sample point "
                                    f"({x.shape[0]} for {y.shape[d]})", op=op,
                                    operands=[("y", describe(y)), ("x", describe(x))])
        x = x.reshape(tuple(x.shape[0] if i == d else 1 for i in range(y.ndim)))
        return x.narrow(d, 1, x.shape[d] - 1) - x.narrow(d, 0, x.shape[d] - 1)
    xd = d - y.ndim + x.ndim
    if xd < 0:
        raise ShapeRuntimeError(f"{op}: x cannot be indexed along dim {d - y.ndim}", op=op,
                                operands=[("y", describe(y)), ("x", describe(x))])
    n = x.shape[xd]
    return x.narrow(xd, 1, n - 1) - x.narrow(xd, 0, n - 1)


def _sides(y: Tensor, d: int) -> tuple[Tensor, Tensor]:
    n = y.shape[d]
    return y.narrow(d, 0, n - 1), y.narrow(d, 1, n - 1)


def _check(op: str, x, dx) -> None:
    if x is not None and dx is not None:
        raise ArgumentError(f"{op}: cannot pass both x and dx", op=op)


@public()
def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The integral of y along dim by the trapezoidal rule (sample points x, or spacing dx)."""
    _check("trapezoid", x, dx)
    d = normalize_dim(dim, y.ndim, "trapezoid")
    if y.shape[d] == 0:  # no interval: zero, in the dtype the rule gives
        return (y.sum(d) * 0.0) if x is None or not isinstance(x, Tensor) else \
            (y.sum(d) * 0.0).to((y.sum(d) * x.sum()).dtype)
    if isinstance(x, Tensor):
        left, right = _sides(y, d)
        return (_spacing(y, x, d, "trapezoid") * (left + right)).sum(d) / 2.0
    step = 1 if dx is None else dx
    if x is not None:  # a number for x: PyTorch reads it as the spacing
        step = x
    return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * step


@public()
def trapz(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """trapezoid's older name (torch.trapz)."""
    return trapezoid(y, x, dx=dx, dim=dim)


@public()
def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral of y along dim (one value fewer than y's)."""
    _check("cumulative_trapezoid", x, dx)
    d = normalize_dim(dim, y.ndim, "cumulative_trapezoid")
    if y.shape[d] == 0:
        return y * 0.0
    left, right = _sides(y, d)
    if isinstance(x, Tensor):
        return (_spacing(y, x, d, "cumulative_trapezoid") * (left + right)).cumsum(d) / 2.0
    step = 1 if dx is None else dx
    if x is not None:
        step = x
    return ((left + right) * (step / 2.0)).cumsum(d)
