"""Distances as norms of differences: dist (between two tensors) and pdist (between every
pair of rows). Composites of sub and the p-norm: gradients and meta shapes come from those."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..registry import public
from .norm import norm


@public(method=True)
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:  # noqa: A002
    """The p-norm of input - other (broadcast), over all elements."""
    for name, t in (("input", input), ("other", other)):
        if isinstance(t, Tensor) and not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise DTypeError(f"dist: expected floating point tensors, got {t.dtype}", op="dist",
                             operands=[(name, describe(t))])
    return norm(input - other, p)


@public(functional=True)
def pdist(input: Tensor, p: float = 2) -> Tensor:  # noqa: A002
    """[N * (N - 1) / 2]: the p-norm distance between rows i < j of input [N, M], in
    row-major order of the pairs (as PyTorch's)."""
    if input.ndim != 2:
        raise ShapeRuntimeError(f"pdist: only supports 2D tensors, got {input.ndim}D",
                                op="pdist", operands=[("input", describe(input))])
    if not input.dtype.is_floating_point:
        raise DTypeError(f"pdist: only supports floating-point dtypes, got {input.dtype}",
                         op="pdist", operands=[("input", describe(input))])
    if p < 0:
        raise ShapeRuntimeError(f"pdist: only supports non-negative p values, got {p}",
                                op="pdist")
    n = input.shape[0]
    # the pairs (i, j), i < j, as rows of one [2, pairs] index (None on meta: shape only)
    ij = input.device.xp.asarray(input.device.xp.triu_indices(n, 1), dtype=_dt.int64.np)
    pairs = Tensor._make(ij, (2, n * (n - 1) // 2), _dt.int64, input.device)
    rows_i = input.index_select(0, pairs[0])
    rows_j = input.index_select(0, pairs[1])
    return norm(rows_i - rows_j, p, dim=-1)
