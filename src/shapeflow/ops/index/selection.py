"""Selection by value: nonzero / argwhere, masked_select / masked_scatter, take,
take_along_dim, searchsorted / bucketize, histc, unique and unique_consecutive.

Ops whose output size depends on the data (nonzero, masked_select, unique) raise a
DeviceError on the meta device, as a boolean mask index does: no shape can be known.
"""

from __future__ import annotations

import math
import numbers

from ... import dtypes as _dt
from ...errors import DeviceError, DTypeError, ShapeError, ShapeIndexError
from ...shape import broadcast_shapes, dims_equal, format_shape, normalize_dim
from ...tensor import Tensor, describe
from ..base import X1, Op, apply, reads_data
from ..elementwise.complex_parts import refuse_complex
from ..movement.index_arrays import INTP, add_at
from ..registry import public
from .gather_scatter import gather

_int64 = _dt.int64
_I64 = _int64.np


def _needs_data(op: str, *ts: Tensor) -> None:
    for t in ts:
        if t._data is None:
            raise DeviceError(
                f"{op}: the size of its result depends on the values of {describe(t)}, and a "
                "meta tensor has none", op=op, operands=[("input", describe(t))],
                hint="run this op on cpu; on meta, trace with a shape-known op instead")


def _check_int_index(op: str, index, what: str = "index") -> None:
    if not isinstance(index, Tensor) or not index.dtype.is_integer:
        got = describe(index) if isinstance(index, Tensor) else type(index).__name__
        raise DTypeError(f"{op}: {what} must be an integer (long) tensor, got {got}", op=op,
                         operands=[(what, got)], hint="convert with .long()")


class Computed(Op):
    """A result computed from the inputs' values in infer (its size depends on them): `fn`
    takes and gives the device's arrays."""

    differentiable = False

    def __init__(self, name: str, fn, dtype=None) -> None:
        self.name, self.fn, self.dtype = name, fn, dtype

    def infer(self, *ts):
        _needs_data(self.name, *ts)
        self.result = self.fn(*[t._data for t in ts])
        dt = self.dtype or _dt.from_numpy_dtype(self.result.dtype)
        self.result = self.result.astype(dt.np, copy=False)
        return self.result.shape, dt

    def forward(self, *arrays):
        return self.result


# ---- nonzero / argwhere -----------------------------------------------------------------
@public(method=True)
def nonzero(x: Tensor, *, as_tuple: bool = False):
    """Indices of the nonzero entries: [n, ndim] int64, or (as_tuple) one 1-d tensor per dim."""
    xp, dev = x.device.xp, x.device

    def fn(a):
        return xp.argwhere(a) if a.ndim else xp.zeros((int(a != 0), 0), _I64)

    out = apply(Computed("nonzero", fn, _int64), x)
    if not as_tuple:
        return out
    n = out.shape[0]
    if x.ndim == 0:
        return (Tensor._make(xp.zeros(n, _I64), (n,), _int64, dev),)
    return tuple(Tensor._make(xp.ascontiguousarray(out._data[:, j]), (n,), _int64, dev)
                 for j in range(x.ndim))


@public(method=True)
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:  # noqa: A002
    """nonzero's [n, ndim] indices cut or padded (with fill_value) to exactly `size` rows: a
    shape known before the data (on meta too)."""
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
        raise ShapeError(f"nonzero_static: 'size' must be a non-negative integer, got {size!r}",
                         op="nonzero_static")
    shape = (int(size), input.ndim)
    if input._data is None:  # meta: the point of nonzero_static, a shape without data
        return Tensor._make(None, shape, _int64, input.device)
    xp = input.device.xp
    found = xp.argwhere(input._data) if input.ndim else \
        xp.zeros((int(input._data != 0), 0), _I64)
    out = xp.full(shape, fill_value, _I64)
    n = min(len(found), size)
    out[:n] = found[:n]
    return Tensor._make(out, shape, _int64, input.device)


@public(method=True)
def argwhere(x: Tensor) -> Tensor:
    """Indices of the nonzero entries, [n, ndim] int64 (nonzero without as_tuple)."""
    return nonzero(x)


# ---- masked_select / masked_scatter ---------------------------------------------------------
def _check_mask(op: str, x: Tensor, mask: Tensor) -> None:
    if not isinstance(mask, Tensor) or mask.dtype is not _dt.bool_:
        got = describe(mask) if isinstance(mask, Tensor) else type(mask).__name__
        raise DTypeError(f"{op}: expected a bool mask, got {got}", op=op,
                         operands=[("input", describe(x)), ("mask", got)],
                         hint="compare first (x > 0), or convert with .bool()")


class MaskedSelect(Op):
    """The entries of x (broadcast with mask) where mask is true, as a 1-d tensor."""

    name = "masked_select"

    def infer(self, x, mask):
        _check_mask(self.name, x, mask)
        self.shape = broadcast_shapes(x.shape, mask.shape, self.name, ("input", "mask"))
        _needs_data(self.name, mask)
        xp = mask.device.xp
        n = int(xp.count_nonzero(xp.broadcast_to(mask._data, self.shape)))
        return (n,), x.dtype

    def saved(self, x, mask, out):
        return (X1,)

    def forward(self, x, mask):
        xp = self.device.xp
        return xp.broadcast_to(x, self.shape)[xp.broadcast_to(mask, self.shape)]

    def backward(self, g):
        from ...factories import zeros

        (mask,) = self.saved_tensors
        base = zeros(self.shape, dtype=g.dtype, device=g.device)
        return apply(MaskedScatter(), base, mask, g), None


@public(method=True)
def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """x's entries where mask (broadcast) is true, in row-major order, as a 1-d tensor."""
    return apply(MaskedSelect(), x, mask)


class MaskedScatter(Op):
    """x with mask's true positions filled, in order, from source's first entries."""

    name = "masked_scatter"

    def infer(self, x, mask, source):
        _check_mask(self.name, x, mask)
        ops = [("input", describe(x)), ("mask", describe(mask)), ("source", describe(source))]
        if source.dtype is not x.dtype:
            raise DTypeError(f"{self.name}: source dtype {source.dtype} must equal the input's "
                             f"{x.dtype}", op=self.name, operands=ops)
        self.shape = broadcast_shapes(x.shape, mask.shape, self.name, ("input", "mask"))
        self.source_shape = tuple(source.shape)
        if mask._data is None or source._data is None:
            reads_data(f"{self.name}'s check that source has an element per true entry")
        else:
            xp = mask.device.xp
            need = int(xp.count_nonzero(xp.broadcast_to(mask._data, self.shape)))
            if need > source._data.size:
                raise ShapeError(f"{self.name}: the mask has {need} true entries but source "
                                 f"has only {source._data.size} elements", op=self.name,
                                 operands=ops, hint="source needs at least one element per "
                                 "true entry of the mask")
        return self.shape, x.dtype

    def saved(self, x, mask, source, out):
        return (X1,)

    def forward(self, x, mask, source):
        xp = self.device.xp
        out = xp.array(xp.broadcast_to(x, self.shape), copy=True)
        m = xp.broadcast_to(mask, self.shape)
        out[m] = source.reshape(-1)[:int(xp.count_nonzero(m))]
        return out

    def backward(self, g):
        (mask,) = self.saved_tensors
        gx = apply(_MaskedFill0(), g, mask) if self.needs_grad(0) else None
        gs = None
        if self.needs_grad(2):
            gs = apply(_MaskedPick(self.source_shape), g, mask)
        return gx, None, gs


class _MaskedPick(Op):
    """g's entries where mask is true, in source's shape (zeros after them): the gradient
    masked_scatter sends its source."""

    name = "masked_scatter_backward"

    def __init__(self, shape) -> None:
        self.shape = shape

    def infer(self, g, mask):
        self.g_shape = tuple(g.shape)
        return self.shape, g.dtype

    def saved(self, g, mask, out):
        return (X1,)

    def forward(self, g, mask):
        xp = self.device.xp
        picked = g[xp.broadcast_to(mask, g.shape)]
        out = xp.zeros(math.prod(self.shape), g.dtype)
        out[:picked.size] = picked
        return out.reshape(self.shape)

    def backward(self, gg):
        from ...factories import zeros

        (mask,) = self.saved_tensors
        base = zeros(self.g_shape, dtype=gg.dtype, device=gg.device)
        return apply(MaskedScatter(), base, mask, gg), None


class _MaskedFill0(Op):
    """g with zeros where mask is true (masked_fill(g, mask, 0) under its own name)."""

    name = "masked_scatter_backward"

    def infer(self, g, mask):
        return tuple(g.shape), g.dtype

    def saved(self, g, mask, out):
        return (X1,)

    def forward(self, g, mask):
        xp = self.device.xp
        return xp.where(mask, xp.zeros((), g.dtype), g)

    def backward(self, gg):
        (mask,) = self.saved_tensors
        return apply(_MaskedFill0(), gg, mask), None


@public(method=True)
def masked_scatter(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """x with the true positions of mask filled from source, in row-major order."""
    return apply(MaskedScatter(), x, mask, source)


@public(sf=False, method=True)
def masked_scatter_(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    from ..inplace import inplace

    return inplace(x, "masked_scatter_", masked_scatter, mask, source)


# ---- take / take_along_dim ------------------------------------------------------------------
def _wrapped(xp, op: str, index, n: int, x_desc: str):
    """index (a device array) checked against n and its negatives wrapped."""
    if index.size and (index.min() < -n or index.max() >= n):
        bad = int(index.max() if index.max() >= n else index.min())
        raise ShapeError(f"{op}: index {bad} out of range for tensor of size {n}", op=op,
                         operands=[("input", x_desc)],
                         hint=f"indices must lie in [{-n}, {n - 1}]")
    return xp.where(index < 0, index + n, index).astype(INTP, copy=False)


class Take(Op):
    """x read as 1-d at index (negative indices count from the end): index's shape."""

    name = "take"

    def infer(self, x, index):
        _check_int_index(self.name, index)
        self.in_shape, self.desc = tuple(x.shape), describe(x)
        return tuple(index.shape), x.dtype

    def saved(self, x, index, out):
        return (X1,)

    def forward(self, x, index):
        return x.reshape(-1)[_wrapped(self.device.xp, self.name, index, x.size, self.desc)]

    def backward(self, g):
        (index,) = self.saved_tensors
        return apply(TakeBackward(self.in_shape), g, index), None


class TakeBackward(Op):
    """g added into zeros of the input's shape at the flat indices (repeats add up)."""

    name = "take_backward"

    def __init__(self, shape) -> None:
        self.shape = shape

    def infer(self, g, index):
        return self.shape, g.dtype

    def saved(self, g, index, out):
        return (X1,)

    def forward(self, g, index):
        xp = self.device.xp
        out = xp.zeros(self.shape, g.dtype)
        flat = out.reshape(-1)
        add_at(xp, flat, _wrapped(xp, "take", index, flat.size, ""), g)
        return out

    def backward(self, gg):
        (index,) = self.saved_tensors
        return apply(Take(), gg, index), None


@public(method=True)
def take(x: Tensor, index: Tensor) -> Tensor:
    """x's entries at index, x read as a 1-d tensor."""
    return apply(Take(), x, index)


@public(method=True)
def take_along_dim(x: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """gather along dim after broadcasting x and indices in the other dims (dim None: 1-d)."""
    from ..movement import expand

    _check_int_index("take_along_dim", indices, "indices")
    if dim is None:
        return gather(x.reshape(-1), 0, indices.reshape(-1))
    if x.ndim != indices.ndim:
        raise ShapeError(
            f"take_along_dim: input and indices should have the same number of dimensions, "
            f"but got {x.ndim} dimensions for input, and {indices.ndim} dimensions for indices",
            op="take_along_dim", operands=[("input", describe(x)), ("indices", describe(indices))])
    if x.ndim == 0:  # PyTorch: IndexError, a 0-d tensor has no dim (dim=None works)
        raise ShapeIndexError(f"take_along_dim: dim {dim} given for a 0-d input, which has no "
                              "dims", op="take_along_dim", operands=[("input", describe(x))],
                              hint="leave dim out to index the flattened input")
    d = normalize_dim(dim, x.ndim, "take_along_dim")
    xs, ins = list(x.shape), list(indices.shape)
    xs[d] = ins[d] = 1
    b = list(broadcast_shapes(tuple(xs), tuple(ins), "take_along_dim", ("input", "indices")))
    bx, bi = list(b), list(b)
    bx[d], bi[d] = x.shape[d], indices.shape[d]
    return gather(expand(x, tuple(bx)), d, expand(indices, tuple(bi)))


# ---- searchsorted / bucketize / histc -------------------------------------------------------
class SearchSorted(Op):
    name = "searchsorted"
    differentiable = False

    def __init__(self, right: bool, out_int32: bool) -> None:
        self.right, self.out_int32 = right, out_int32

    def infer(self, seq, values, sorter=None):
        ops = [("sorted_sequence", describe(seq)), ("input", describe(values))]
        if seq.ndim == 0:
            raise ShapeError("searchsorted: boundaries tensor should be 1 dimension or the "
                             "first N-1 dimensions of boundaries tensor and input value tensor "
                             "must match", op=self.name, operands=ops)
        if seq.ndim > 1 and (seq.ndim != values.ndim or not all(
                dims_equal(a, b) for a, b in zip(seq.shape[:-1], values.shape[:-1]))):
            raise ShapeError(
                f"searchsorted: the first N-1 dimensions of sorted_sequence "
                f"{format_shape(seq.shape)} and input {format_shape(values.shape)} must "
                "match", op=self.name, operands=ops,
                hint="use a 1-d sorted_sequence to search every value in one sequence")
        if sorter is not None:
            _check_int_index(self.name, sorter, "sorter")
            if tuple(sorter.shape) != tuple(seq.shape):
                raise ShapeError("searchsorted: sorter must have the sorted_sequence's shape",
                                 op=self.name, operands=ops + [("sorter", describe(sorter))])
        if seq.dtype.is_bool or values.dtype.is_bool:
            raise DTypeError("searchsorted: bool tensors are not supported", op=self.name,
                             operands=ops)
        if seq.dtype.is_complex or values.dtype.is_complex:  # no order, as PyTorch says
            refuse_complex(self.name, seq, values)
        return tuple(values.shape), _dt.int32 if self.out_int32 else _int64

    def forward(self, seq, values, sorter=None):
        side = "right" if self.right else "left"
        xp = self.device.xp
        if sorter is not None:
            n = seq.shape[-1]
            if sorter.size and (sorter.min() < 0 or sorter.max() >= n):
                raise ShapeError(f"searchsorted: sorter index out of range for size {n}",
                                 op=self.name)
            seq = xp.take_along_axis(seq, sorter.astype(INTP), -1)
        dt = _dt.int32.np if self.out_int32 else _I64
        if seq.ndim == 1:
            return xp.searchsorted(seq, values, side=side).astype(dt)
        s2, v2 = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
        out = xp.stack([xp.searchsorted(s, v, side=side) for s, v in zip(s2, v2)]) if len(
            s2) else xp.zeros(v2.shape, dt)
        return out.reshape(values.shape).astype(dt)


@public()
def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False,  # noqa: A002
                 right: bool = False, side: str | None = None, sorter=None) -> Tensor:
    """Where each value would go in sorted_sequence (its last dim) to keep it sorted."""
    if side is not None:
        if side not in ("left", "right"):
            raise ShapeError(f"searchsorted: side can only be 'left' or 'right', got {side!r}",
                             op="searchsorted")
        if right and side == "left":
            raise ShapeError("searchsorted: side and right can't be set to opposites, got side "
                             "of left while right was True", op="searchsorted")
        right = side == "right"
    if not isinstance(input, Tensor):
        dev = sorted_sequence.device  # a number: onto the sequence's device
        input = Tensor._make(dev.asarray(input, sorted_sequence.dtype.np), (),  # noqa: A001
                             sorted_sequence.dtype, dev)
    args = (sorted_sequence, input) if sorter is None else (sorted_sequence, input, sorter)
    return apply(SearchSorted(right, out_int32), *args)


@public(method=True)
def bucketize(input: Tensor, boundaries: Tensor, *, out_int32: bool = False,  # noqa: A002
              right: bool = False) -> Tensor:
    """The bucket of each input value among the 1-d boundaries (searchsorted's index)."""
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries tensor must be 1 dimension, but got dim("
                         f"{boundaries.ndim})", op="bucketize",
                         operands=[("boundaries", describe(boundaries))])
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


class Histc(Op):
    name = "histc"
    differentiable = False

    def __init__(self, bins: int, lo, hi) -> None:
        self.bins, self.lo, self.hi = bins, lo, hi

    def infer(self, x):
        if not x.dtype.is_floating_point:
            raise DTypeError(f"histc: input must be a floating tensor, got {x.dtype}",
                             op=self.name, operands=[("input", describe(x))])
        if not isinstance(self.bins, int) or self.bins <= 0:
            raise ShapeError(f"histc: bins must be > 0, got {self.bins}", op=self.name)
        if self.hi < self.lo:
            raise ShapeError(f"histc: max must be larger than min, got min {self.lo} and max "
                             f"{self.hi}", op=self.name, operands=[("input", describe(x))])
        return (self.bins,), x.dtype

    def forward(self, x):
        lo, hi = float(self.lo), float(self.hi)
        if lo == hi and x.size:
            lo, hi = float(x.min()), float(x.max())
        if lo == hi:  # PyTorch widens an empty range by one on each side
            lo, hi = lo - 1, hi + 1
        xp = self.device.xp
        v = x.reshape(-1).astype(_dt.float64.np)
        v = v[(v >= lo) & (v <= hi)]
        idx = ((v - lo) * self.bins / (hi - lo)).astype(_I64)
        xp.minimum(idx, self.bins - 1, out=idx)  # the max value goes in the last bin
        return xp.bincount(idx, minlength=self.bins).astype(x.dtype)


@public(method=True)
def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    """A histogram of input's values in `bins` equal bins over [min, max] (0, 0: the data's)."""
    return apply(Histc(bins, min, max), input)


# ---- unique / unique_consecutive ------------------------------------------------------------
def _unique_result(x: Tensor, op: str, values, inverse, counts, return_inverse, return_counts):
    out = apply(Computed(op, lambda a: values, x.dtype), x)
    extra = []
    for want, a in ((return_inverse, inverse), (return_counts, counts)):
        if want:
            a = a.astype(_I64, copy=False)
            extra.append(Tensor._make(a, tuple(a.shape), _int64, x.device))
    return (out, *extra) if extra else out


@public(method=True)
def unique(x: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None):
    """The distinct values (or slices along dim), sorted; optionally inverse and counts."""
    refuse_complex("unique", x)  # PyTorch's sorts complex numbers nowhere
    _needs_data("unique", x)
    a, xp = x._data, x.device.xp
    if dim is None:
        values, inverse, counts = xp.unique(a.reshape(-1), return_inverse=True,
                                            return_counts=True)
        inverse = inverse.reshape(a.shape)
    else:
        d = normalize_dim(dim, x.ndim, "unique")
        if a.shape[d] == 0:
            values, inverse, counts = a, xp.zeros(0, _I64), xp.zeros(0, _I64)
        else:
            values, inverse, counts = xp.unique(a, return_inverse=True, return_counts=True,
                                                axis=d)
            inverse = inverse.reshape(-1)
    return _unique_result(x, "unique", values, inverse, counts, return_inverse, return_counts)


@public(method=True)
def unique_consecutive(x: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """Each run of equal consecutive values (or slices along dim) kept once."""
    refuse_complex("unique_consecutive", x)  # refused as PyTorch does
    _needs_data("unique_consecutive", x)
    a, xp = x._data, x.device.xp
    if dim is None:
        flat = a.reshape(-1)
        new = xp.ones(flat.shape, bool)
        new[1:] = flat[1:] != flat[:-1]
        starts = xp.flatnonzero(new)
        values = flat[starts]
        inverse = (xp.cumsum(new) - 1).reshape(a.shape)
    else:
        d = normalize_dim(dim, x.ndim, "unique_consecutive")
        moved = xp.moveaxis(a, d, 0).reshape(a.shape[d], -1)
        new = xp.ones(a.shape[d], bool)
        new[1:] = (moved[1:] != moved[:-1]).any(-1)
        starts = xp.flatnonzero(new)
        values = xp.take(a, starts, axis=d)
        inverse = xp.cumsum(new) - 1
    counts = xp.diff(xp.append(starts, new.size))
    return _unique_result(x, "unique_consecutive", values, inverse, counts, return_inverse,
                          return_counts)
