"""Sums over the leading or trailing dims of an array as a matrix-vector product.

NumPy reduces each short row on its own (~20 ns a row plus the elements); OpenBLAS's gemv
sums a [rows, n] array in one pass, 3-7x faster for the row lengths of a layer norm, a
softmax or a bias gradient. Float32 sums longer than `_MAX_LEN` stay with NumPy's
pairwise summation, whose error grows as log n instead of n. The cpu kernel table
(ladder.py) runs its sum, row_sums, col_sums and row_means kernels through these.
"""

from __future__ import annotations

import math

import numpy as np

_MAX_LEN = {np.dtype(np.float32): 1 << 13, np.dtype(np.float64): 1 << 20}
_ones: dict = {}


def _ones_of(n: int, dtype) -> np.ndarray:
    key = (n, dtype)
    v = _ones.get(key)
    if v is None:
        if len(_ones) > 64:  # a few sizes recur in a model; do not keep every one ever seen
            _ones.clear()
        v = _ones[key] = np.ones(n, dtype)
    return v


def ones_for(x2: np.ndarray, axis: int) -> np.ndarray | None:
    """The ones vector whose product with x2 sums it over `axis` (0 or 1), or None where
    NumPy's own sum is the better one (another dtype, a long float32 sum, nothing to sum)."""
    n = x2.shape[axis]
    limit = _MAX_LEN.get(x2.dtype)
    if limit is None or n > limit or n == 0:
        return None
    return _ones_of(n, x2.dtype)


def _sums(x2: np.ndarray, axis: int) -> np.ndarray:
    ones = ones_for(x2, axis)
    if ones is None:
        return x2.sum(axis=axis)
    return x2 @ ones if axis == 1 else ones @ x2


def row_sums(x2: np.ndarray) -> np.ndarray:
    """Sums of the rows of a 2-D float array, shape [rows]."""
    return _sums(x2, 1)


def col_sums(x2: np.ndarray) -> np.ndarray:
    """Sums of the columns of a 2-D float array, shape [cols]."""
    return _sums(x2, 0)


def sum_over(x: np.ndarray, axes: tuple, keepdims: bool) -> np.ndarray | None:
    """x summed over `axes` (sorted) by BLAS, or None where that does not apply.

    Applies to C-contiguous float32/float64 arrays reduced over some leading or some
    trailing dims (not all of them: one contiguous reduce is already fast), or over a short
    run of middle dims (slice adds, not BLAS).
    """
    nd, k = x.ndim, len(axes)
    if not 0 < k < nd or x.dtype not in _MAX_LEN or not x.flags.c_contiguous or x.size == 0:
        return None
    shape = x.shape
    if axes == tuple(range(k)):
        rows = math.prod(shape[:k])
        out = col_sums(x.reshape(rows, x.size // rows))
        kept = shape[k:]
        full = (1,) * k + kept
    elif axes == tuple(range(nd - k, nd)):
        cols = math.prod(shape[nd - k:])
        out = row_sums(x.reshape(x.size // cols, cols))
        kept = shape[: nd - k]
        full = kept + (1,) * k
    elif axes == tuple(range(axes[0], axes[0] + k)):
        out = _middle_sum(x, axes[0], axes[0] + k)
        if out is None:
            return None
        kept = shape[:axes[0]] + shape[axes[0] + k:]
        full = shape[:axes[0]] + (1,) * k + shape[axes[0] + k:]
    else:
        return None
    return out.reshape(full if keepdims else kept)


def _middle_sum(x: np.ndarray, i: int, j: int) -> np.ndarray | None:
    """x summed over its dims i..j-1 (neither leading nor trailing) as R [A, C] slice adds.

    NumPy reduces a middle dim C elements at a time (~4 ns an element when C is 8, as
    repeat_kv's expand backward has); adding the R slices is 5-10x faster at R <= 16 and
    sums in NumPy's order, r = 0, 1, ...: the same result. With C = 1 the summed elements are
    adjacent and NumPy sums them pairwise (fast already): that case stays NumPy's.
    """
    r, c = math.prod(x.shape[i:j]), math.prod(x.shape[j:])
    if r > 16 or c >= 256 or c == 1:
        return None
    y = x.reshape(x.size // (r * c), r, c)
    if r == 1:
        return y[:, 0].copy()
    out = np.add(y[:, 0], y[:, 1])
    for m in range(2, r):
        out += y[:, m]
    return out
