"""Ops defined by the flat positions a view of x covers: as_strided, and the *_scatter ops
that write src where a view would be (select_scatter, slice_scatter, diagonal_scatter,
as_strided_scatter), and put (flat indices).

Each finds the positions once on the host (NumPy, `index_arrays.host`) on an arange of x's
size, moves them to x's device, then reads them with
`take` or writes them with `index_copy` / `index_add` on x flattened: those primitives give
the gradients (to both x and src), the meta shapes and the saved set.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ShapeError, ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..base import reads_data
from ..movement.index_arrays import host
from ..registry import public


def _positions(x: Tensor):
    """x's row-major flat positions in x's shape (a host array)."""
    shape = tuple(x.shape)
    if any(type(s) is not int for s in shape):
        raise ShapeError("flat positions need concrete sizes", op="as_strided",
                         operands=[("input", describe(x))])
    return host.arange(int(host.prod(shape, dtype=host.int64)), dtype=host.int64).reshape(shape)


def _index(pos, like: Tensor) -> Tensor:
    """The host positions as a 1-d int64 tensor on like's device (meta: shape only)."""
    flat = host.ascontiguousarray(pos).reshape(-1)
    return Tensor._make(like.device.from_numpy(flat), flat.shape, _dt.int64, like.device)


def _write(op: str, x: Tensor, pos, src: Tensor) -> Tensor:
    """x with src written at the positions pos (src's shape must be pos's)."""
    from .scatter_reduce import index_copy

    if tuple(src.shape) != pos.shape:
        raise ShapeRuntimeError(f"{op}: expected src to have a size equal to the slice of "
                                f"self: {list(pos.shape)}, got {list(src.shape)}", op=op,
                                operands=[("input", describe(x)), ("src", describe(src))])
    if src.dtype is not x.dtype:
        src = src.to(x.dtype)
    out = index_copy(x.reshape(-1), 0, _index(pos, x), src.reshape(-1))
    return out.reshape(tuple(x.shape))


def _strided(pos, x: Tensor, size, stride, storage_offset, op: str):
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    offset = 0 if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise ShapeRuntimeError(f"{op}: mismatch in length of strides and shape ({len(size)} "
                                f"sizes, {len(stride)} strides)", op=op)
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise ShapeRuntimeError(f"{op}: sizes, strides and storage_offset must be "
                                f"non-negative, got {size}, {stride}, {offset}", op=op)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else offset - 1
    if last >= pos.size:
        raise ShapeRuntimeError(
            f"{op}: setStorage: sizes {list(size)}, strides {list(stride)} and storage offset "
            f"{offset} reach element {last}, out of bounds for storage of {pos.size} elements",
            op=op, operands=[("input", describe(x))])
    flat = pos.reshape(-1)
    item = flat.itemsize
    return host.lib.stride_tricks.as_strided(flat[offset:] if offset < flat.size else flat[:0],
                                           size, tuple(s * item for s in stride))


@public(method=True)
def as_strided(input: Tensor, size, stride, storage_offset=None) -> Tensor:  # noqa: A002
    """A tensor of `size` reading input's storage at offset + sum(i_k * stride_k), as
    PyTorch: for a view, the storage is its base's, and the offset (default: the view's own)
    counts from the base's start. A copy here, not a view; the gradient goes to input's
    elements (those of the base outside the view get none, as in PyTorch)."""
    from .scatter_reduce import index_copy
    from .selection import take

    storage = _storage(input)
    if storage is None:  # contiguous from its storage's start (or meta): input is the storage
        pos = _strided(_positions(input), input, size, stride, storage_offset, "as_strided")
        return take(input, _index(pos, input).reshape(pos.shape))
    root, mine, own_offset = storage
    offset = own_offset if storage_offset is None else storage_offset
    pos = _strided(host.arange(root.size, dtype=host.int64), input, size, stride, offset,
                   "as_strided")
    # the storage as a tensor: the base's values, input's own elements from input itself
    # (so they carry its gradient)
    base = Tensor._make(input.device.from_numpy(host.array(root)), (root.size,), input.dtype,
                        input.device)
    flat = index_copy(base, 0, _index(mine, input), input.reshape(-1))
    return take(flat, _index(pos, input).reshape(pos.shape))


def _storage(x: Tensor):
    """(the base's elements flat, x's element positions in them, x's storage offset) for a
    cpu view of another array's memory at an offset or with strides; None where x's memory
    is its own, row-major from the start (then x itself is the storage)."""
    a = x._data
    if a is None or not isinstance(a, host.ndarray):
        return None
    root = a
    while isinstance(root.base, host.ndarray):
        root = root.base
    if root is a and a.flags.c_contiguous:
        return None
    if root.dtype.itemsize != a.itemsize or not root.flags.c_contiguous:
        return None  # a reinterpreting view, or a base with strides of its own: x's order
    start = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    item = a.itemsize
    if start % item or any(s % item or s <= 0 for s in a.strides):
        return None  # (broadcast or reversed views: shapeflow copies where PyTorch views)
    if start == 0 and a.flags.c_contiguous:
        return None
    mine = host.lib.stride_tricks.as_strided(
        host.arange(root.size, dtype=host.int64)[start // item:], a.shape,
        tuple(s // item * 8 for s in a.strides))
    return root.reshape(-1), host.ascontiguousarray(mine).reshape(-1), start // item


@public(method=True)
def as_strided_scatter(input: Tensor, src: Tensor, size, stride,  # noqa: A002
                       storage_offset=None) -> Tensor:
    """input with src written where as_strided(input, size, stride, offset) reads."""
    pos = _strided(_positions(input), input, size, stride, storage_offset, "as_strided_scatter")
    if len(host.unique(pos)) != pos.size:  # PyTorch's rule: a write through overlap is ambiguous
        raise ShapeRuntimeError("as_strided_scatter: the strided view overlaps itself, so the "
                                "values written are ambiguous", op="as_strided_scatter")
    return _write("as_strided_scatter", input, pos, src)


@public(method=True)
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:  # noqa: A002
    """input with src written at input.select(dim, index)."""
    d = normalize_dim(dim, input.ndim, "select_scatter")
    n = input.shape[d]
    if not -n <= index < n:
        raise ShapeError(f"select_scatter: index {index} out of range for dim {dim} of size "
                         f"{n}", op="select_scatter", operands=[("input", describe(input))])
    pos = host.take(_positions(input), index, axis=d)
    return _write("select_scatter", input, pos, src)


@public(method=True)
def slice_scatter(input: Tensor, src: Tensor, dim: int = 0, start=None, end=None,  # noqa: A002
                  step: int = 1) -> Tensor:
    """input with src written at input[..., start:end:step, ...] (along dim)."""
    if step <= 0:
        raise ShapeRuntimeError(f"slice_scatter: slice step must be positive, got {step}",
                                op="slice_scatter")
    d = normalize_dim(dim, input.ndim, "slice_scatter")
    pos = _positions(input)[(slice(None),) * d + (slice(start, end, step),)]
    return _write("slice_scatter", input, pos, src)


@public(method=True)
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0,  # noqa: A002
                     dim2: int = 1) -> Tensor:
    """input with src written on input.diagonal(offset, dim1, dim2)."""
    d1 = normalize_dim(dim1, input.ndim, "diagonal_scatter")
    d2 = normalize_dim(dim2, input.ndim, "diagonal_scatter")
    if d1 == d2:
        raise ShapeRuntimeError("diagonal_scatter: dim1 and dim2 cannot be the same "
                                f"({dim1}, {dim2})", op="diagonal_scatter")
    pos = host.diagonal(_positions(input), offset, d1, d2)
    return _write("diagonal_scatter", input, pos, src)


@public(method=True)
def put(input: Tensor, index: Tensor, source: Tensor,  # noqa: A002
        accumulate: bool = False) -> Tensor:
    """input with source's values at the flat positions index names (negative ones count
    from the end); accumulate adds them (repeats add up) instead of writing."""
    from .dim_index import index_add
    from .scatter_reduce import index_copy

    n = 1
    for s in input.shape:
        n *= s
    if index.dtype is not _dt.int64:
        raise ShapeRuntimeError(f"put: index must be an int64 tensor, got {index.dtype}",
                                op="put", operands=[("index", describe(index))])
    if index.numel() != source.numel():
        raise ShapeRuntimeError(f"put: expected source and index to have the same number of "
                                f"elements, got {source.numel()} and {index.numel()}",
                                op="put", operands=[("index", describe(index)),
                                                    ("source", describe(source))])
    flat_index = index.reshape(-1)
    if index._data is None:
        reads_data("put's check of its indices")
    elif index._data.size:
        data = index._data.reshape(-1)
        if data.min() < -n or data.max() >= n:
            bad = int(data.max() if data.max() >= n else data.min())
            raise ShapeError(f"put: index {bad} out of range for tensor of {n} elements",
                             op="put", operands=[("input", describe(input))])
        if data.min() < 0:
            flat_index = Tensor._make(index.device.xp.where(data < 0, data + n, data),
                                      data.shape, _dt.int64, index.device)
    src = source.reshape(-1)
    if src.dtype is not input.dtype:
        src = src.to(input.dtype)
    write = index_add if accumulate else index_copy
    return write(input.reshape(-1), 0, flat_index, src).reshape(tuple(input.shape))
