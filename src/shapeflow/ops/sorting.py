"""Sorting along a dim: sort, argsort, msort, topk and kthvalue.

One primitive (`SortAlong`) orders a dim with a stable sort and keeps the first k positions
(all for sort, k for topk, the k-th for kthvalue); its values' gradient is scattered back to
the positions the indices name, as PyTorch does.
"""

from __future__ import annotations

import numbers
from collections import namedtuple

from .. import dtypes as _dt
from ..errors import DTypeError, ShapeError
from ..shape import normalize_dim
from ..tensor import Tensor, describe
from .base import Op, Saved, apply
from .registry import public

# torch.return_types.sort / .topk / .kthvalue: tuples with .values and .indices
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])

_int64 = _dt.int64


def stable_argsort(xp, x, axis: int, descending: bool):
    """Stable order of x along axis, through the namespace xp (NaN counts as largest, as in
    PyTorch)."""
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable")
    # descending and stable: sort the reversed array ascending, reverse, map the positions
    n = x.shape[axis]
    rev = xp.flip(x, axis)
    order = xp.flip(xp.argsort(rev, axis=axis, kind="stable"), axis)
    return (n - 1) - order


def _check_k(op: str, k, n, x: Tensor, low: int) -> None:
    if not isinstance(k, numbers.Integral) or isinstance(k, bool):
        raise DTypeError(f"{op}: k must be an int, got {k!r}", op=op,
                         operands=[("input", describe(x))])
    if type(n) is int and not (low <= k <= n):
        raise ShapeError(
            f"{op}: k ({k}) is out of range for dim of size {n} (expected {low} <= k <= {n})",
            op=op, operands=[("input", describe(x))],
            hint="k cannot exceed the size of the dim; use min(k, x.size(dim))")


class SortAlong(Op):
    """The first k entries of x's dim in sorted order: values (indices kept for backward)."""

    def __init__(self, name: str, dim: int, descending: bool, k=None, keepdim=True) -> None:
        self.name, self.dim, self.descending = name, dim, descending
        self.k, self.keepdim = k, keepdim

    def infer(self, x):
        if x.dtype.is_complex:  # PyTorch has no order of complex numbers
            from .elementwise.complex_parts import refuse_complex

            refuse_complex(self.name, x)
        self.d = d = normalize_dim(self.dim, x.ndim, self.name)
        self.in_shape = shape = tuple(x.shape)
        n = shape[d] if x.ndim else 1
        keep = list(shape)
        if self.name == "kthvalue":
            _check_k(self.name, self.k, n, x, 1)
            if x.ndim:
                keep[d] = 1
        elif self.k is not None:
            _check_k(self.name, self.k, n, x, 0)
            if x.ndim:
                keep[d] = self.k
        self.keep_shape = tuple(keep)
        if self.name == "kthvalue" and not self.keepdim and x.ndim:
            return tuple(s for i, s in enumerate(shape) if i != d), x.dtype
        return self.keep_shape, x.dtype

    def saved(self, x, out):
        return (Saved.new("indices", self.keep_shape, _int64),)

    def forward(self, x):
        xp, i64 = self.device.xp, _int64.np
        if x.ndim == 0:
            idx = xp.zeros((), i64)
            values = x.copy()
        else:
            d = self.d
            idx = stable_argsort(xp, x, d, self.descending)
            if self.name == "kthvalue":
                idx = xp.take(idx, xp.arange(self.k - 1, self.k), axis=d)
            elif self.k is not None:
                idx = xp.take(idx, xp.arange(self.k), axis=d)
            idx = idx.astype(i64, copy=False)
            values = xp.take_along_axis(x, idx, axis=d)
            if self.name == "kthvalue" and not self.keepdim:
                values = values.squeeze(d)
        self.indices = idx  # backward's (the engine takes it when the node is recorded)
        # the user's indices are a copy: changing them in place cannot corrupt backward
        self.indices_out = idx.reshape(values.shape).copy()
        return values

    def backward(self, g):
        from ..factories import zeros
        from .index.gather_scatter import scatter_add

        (idx,) = self.saved_tensors
        if tuple(g.shape) != self.keep_shape:
            g = g.reshape(self.keep_shape)
        base = zeros(self.in_shape, dtype=g.dtype, device=g.device)
        return (scatter_add(base, self.d, idx, g),)


def _run(op: SortAlong, x: Tensor, result):
    values = apply(op, x)
    data = op.__dict__.pop("indices_out", None)  # None on meta
    indices = Tensor._make(data, values.shape, _int64, x.device)
    return result(values, indices)


@public(method=True)
def sort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """(values, indices) of x sorted along dim; always stable (equal values keep their order)."""
    return _run(SortAlong("sort", dim, descending), x, SortResult)


@public(method=True)
def argsort(x: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    """The indices that sort x along dim (stable)."""
    return sort(x, dim, descending).indices


@public(method=True)
def msort(x: Tensor) -> Tensor:
    """x sorted along its first dim."""
    return sort(x, 0).values


@public(method=True)
def topk(x: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """(values, indices) of the k largest (or smallest) entries along dim, in sorted order."""
    return _run(SortAlong("topk", dim, largest, k), x, TopkResult)


@public(method=True)
def kthvalue(x: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """(values, indices) of the k-th smallest entry along dim (k counts from 1)."""
    return _run(SortAlong("kthvalue", dim, False, k, keepdim), x, KthvalueResult)
