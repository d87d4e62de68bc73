"""Strides on the meta device: which views NumPy would make, and where it would copy.

A meta tensor has no data, but a memory plan must know whether `reshape` or `contiguous()`
allocates. For concrete shapes each non-contiguous meta view keeps a *layout*: a host NumPy
array (made with `host`, the cpu device's namespace: bookkeeping, not tensor data) of the
same shape and strides over a one-byte buffer, never read. Permute, expand and
indexing run on it as NumPy views; reshape applies NumPy's no-copy rule to its strides.
Symbolic shapes fall back to a rule: a permuted or expanded view is strided (a permutation
of a C-ordered array is remembered, so permuting back is contiguous again), and reshaping a
strided view copies unless it only adds or drops unit dims.
"""

from __future__ import annotations

import weakref

from ..device import cpu
from ..shape import is_concrete

host = cpu.xp  # layouts are host arrays whatever the tensor's device
_BYTE = host.zeros(1, host.uint8)


class _IdMap:
    """tensor -> value while the tensor lives, by identity (a Tensor's == is elementwise)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple] = {}

    def __setitem__(self, t, value) -> None:
        key = id(t)
        self._items[key] = (weakref.ref(t, lambda _, k=key: self._items.pop(k, None)), value)

    def get(self, t, default=None):
        hit = self._items.get(id(t))
        return default if hit is None or hit[0]() is not t else hit[1]

    def __contains__(self, t) -> bool:
        hit = self._items.get(id(t))
        return hit is not None and hit[0]() is t


_layouts = _IdMap()  # meta tensor -> layout array, for non-contiguous concrete views
# meta tensors with symbolic shapes known to be strided: True, or the permutation of a
# C-ordered array they are
_strided_symbolic = _IdMap()


def _layout(t):
    arr = _layouts.get(t)
    if arr is None:
        shape = tuple(t.shape)
        arr = host.lib.stride_tricks.as_strided(_BYTE, shape, _contiguous(shape),
                                              writeable=False)
    return arr


def is_contiguous(t) -> bool:
    """Whether NumPy would hold this meta tensor C-contiguous."""
    return t not in _layouts and t not in _strided_symbolic


def swapped(t, d0: int, d1: int) -> None:
    """Lay meta `t` out as the transpose (d0, d1) of a C-ordered array of the swapped shape,
    as a kernel that writes its output that way does."""
    shape = tuple(t.shape)
    if not is_concrete(shape):
        perm = list(range(len(shape)))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        _strided_symbolic[t] = tuple(perm)
        return
    other = list(shape)
    other[d0], other[d1] = other[d1], other[d0]
    strides = list(_contiguous(tuple(other)))
    strides[d0], strides[d1] = strides[d1], strides[d0]
    arr = host.lib.stride_tricks.as_strided(_BYTE, shape, tuple(strides), writeable=False)
    if not arr.flags.c_contiguous:
        _layouts[t] = arr


def view(op, x, out) -> bool:
    """Whether the view op `op` applied to meta `x` gives a view (True) or a copy (False)."""
    if is_concrete(x.shape) and is_concrete(out.shape):
        arr = op.meta_layout(_layout(x))
        if arr is None:
            return False  # NumPy would copy
        if not arr.flags.c_contiguous:
            _layouts[out] = arr
        return True
    prior = _strided_symbolic.get(x)
    if op.name == "permute" and prior is not True and x not in _layouts:
        # a permuted C-ordered array stays one: compose, so permuting back is contiguous
        perm = tuple(op.dims) if prior is None else tuple(prior[d] for d in op.dims)
        if perm != tuple(range(len(perm))):
            _strided_symbolic[out] = perm
        return True
    strided = prior is not None or x in _layouts
    if op.name == "reshape":
        if strided and not _same(_drop_units(x.shape), _drop_units(out.shape)):
            return False
    elif op.name in ("permute", "expand"):
        strided = strided or not _same(x.shape, out.shape) or op.name == "permute" and (
            tuple(op.dims) != tuple(range(len(op.dims))))
    if strided:
        _strided_symbolic[out] = True
    return True


def _same(a, b) -> bool:
    from ..shape import dims_equal

    return len(a) == len(b) and all(dims_equal(x, y) is True for x, y in zip(a, b))


def _drop_units(shape) -> tuple:
    return tuple(s for s in shape if not (type(s) is int and s == 1))


def reshape_layout(arr, shape):
    """arr reshaped as a view, or None where NumPy would have to copy.

    Computed on the strides alone (NumPy's no-copy reshape rule); asking NumPy itself
    could make it read the one-byte buffer behind the layout.
    """
    shape = tuple(shape)
    strides = _nocopy_strides(arr.shape, arr.strides, shape)
    if strides is None:
        return None
    return host.lib.stride_tricks.as_strided(_BYTE, shape, strides, writeable=False)


def _nocopy_strides(old_shape, old_strides, new_shape):
    """Strides of new_shape viewing the same elements, or None (NumPy's attempt_nocopy)."""
    if 0 in old_shape or 0 in new_shape:
        return _contiguous(new_shape)
    old = [(n, s) for n, s in zip(old_shape, old_strides) if n != 1]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(new_shape) and oi < len(old):
        nj, oj = ni + 1, oi + 1
        np_, op_ = new_shape[ni], old[oi][0]
        while np_ != op_:
            if np_ < op_:
                np_ *= new_shape[nj]
                nj += 1
            else:
                op_ *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):  # the merged old dims must be contiguous among themselves
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        ni, oi = nj, oj
    last = new_strides[ni - 1] if ni > 0 else 1
    for k in range(ni, len(new_shape)):  # trailing unit dims
        new_strides[k] = last
    return tuple(new_strides)


def _contiguous(shape) -> tuple:
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))
