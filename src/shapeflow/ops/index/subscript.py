"""Indexing: `x[index]` and `x[index] = value` with PyTorch's rules.

An index is split in two steps, as PyTorch does: ints, slices and None select a view
(`movement.Index`, whose backward scatters the gradient into zeros); then integer and
boolean tensors (advanced indexing) gather a copy (`AdvancedIndex`, whose backward
accumulates repeated indices with `add.at`). Advanced indices that are next to each
other put their broadcast shape where they stand; separated (by a slice or None), they
put it first, as in NumPy.

Index arrays from a list or a NumPy array are made on the host and moved to the indexed
tensor's device; on meta, which makes no arrays, they stay on the host for their shape and
bounds.
"""

from __future__ import annotations

import warnings

from ... import dtypes as _dt
from ...autograd import grad_mode
from ...errors import DeviceError, DTypeError, ShapeError, ShapeIndexError, ShapeRuntimeError
from ...shape import broadcast_shapes, dims_equal, format_shape
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..movement import Index, _view_apply, basic_index
from ..movement.index_arrays import INTP, add_at, host
from ..registry import public

_INT, _SLICE, _NONE, _ELLIPSIS, _BOOL, _ADV, _MASK = range(7)
_FULL = slice(None)
_SEQ_AS_TUPLE = (slice, type(Ellipsis), type(None), list, tuple, Tensor, host.ndarray)


class MetaIndex:
    """An integer index tensor on the meta device: a shape and no values."""

    __slots__ = ("shape",)

    def __init__(self, shape) -> None:
        self.shape = tuple(shape)


# ---- parsing an index into (basic key, advanced key) -------------------------------------
def _classify(obj, x: Tensor):
    """(kind, value) for one entry of an index."""
    t = type(obj)
    if t is int:
        return _INT, obj
    if t is slice:
        return _SLICE, obj
    if obj is None:
        return _NONE, None
    if obj is Ellipsis:
        return _ELLIPSIS, None
    if t is bool or isinstance(obj, host.bool_):
        return _BOOL, bool(obj)
    if isinstance(obj, Tensor):
        return _classify_tensor(obj)
    if isinstance(obj, host.integer):
        return _INT, int(obj)
    if isinstance(obj, (list, tuple)):
        arr = host.asarray(obj) if len(obj) else host.zeros(0, host.int64)
        return _classify_array(arr)
    if isinstance(obj, host.ndarray):
        return _classify_array(obj)
    from ...symbolic import is_symbolic

    if is_symbolic(obj):
        return _INT, obj
    raise DTypeError(
        f"getitem: only ints, slices, None, Ellipsis and integer or boolean tensors are valid "
        f"indices, got {type(obj).__name__}", op="getitem", operands=[("input", describe(x))])


def _classify_array(arr):
    """(kind, value) for a host array (parse_index moves it to the tensor's device)."""
    kind = arr.dtype.kind
    if kind == "b":
        return (_BOOL, bool(arr)) if arr.ndim == 0 else (_MASK, arr)
    if kind in "iu":
        return (_INT, int(arr)) if arr.ndim == 0 else (_ADV, arr)
    raise DTypeError(f"getitem: tensors used as indices must be integer or bool, got "
                     f"{arr.dtype}", op="getitem", hint="convert the index with .long()")


def _classify_tensor(t: Tensor):
    dt = t.dtype
    if dt is _dt.uint8:
        warnings.warn("indexing with dtype uint8 is deprecated (as in PyTorch): it is treated "
                      "as a bool mask; use a bool tensor", DeprecationWarning, stacklevel=4)
        dt = _dt.bool_
        t = t if t._data is None else Tensor._make(t._data.astype(bool), t.shape, dt, t.device)
    if dt is _dt.bool_:
        if t._data is None:
            raise DeviceError(
                f"getitem: a boolean mask on the meta device {describe(t)} selects a number "
                "of elements that depends on its data", op="getitem",
                hint="index with integer tensors (their shape is known), or run on cpu")
        return (_BOOL, bool(t._data)) if t.ndim == 0 else (_MASK, t._data)
    if not dt.is_integer:
        raise DTypeError(f"getitem: tensors used as indices must be integer or bool, got "
                         f"{describe(t)}", op="getitem", hint="convert the index with .long()")
    if t._data is None:
        return _ADV, MetaIndex(t.shape)
    return (_INT, int(t._data)) if t.ndim == 0 else (_ADV, t._data)


def _items(index) -> tuple:
    if type(index) is tuple:
        return index
    if type(index) is list and len(index) < 32 and any(
            isinstance(i, _SEQ_AS_TUPLE) for i in index):
        return tuple(index)  # PyTorch still reads x[[i, j]] with sequences inside as x[i, j]
    return (index,)


def parse_index(x: Tensor, index):
    """(basic key for movement.Index, advanced key over the view's dims or None)."""
    items = [_classify(i, x) for i in _items(index)]
    consumed, ellipsis = 0, False
    for kind, v in items:
        if kind in (_INT, _SLICE, _ADV):
            consumed += 1
        elif kind == _MASK:
            consumed += v.ndim
        elif kind == _ELLIPSIS:
            if ellipsis:
                raise ShapeRuntimeError("getitem: an index can only have a single ellipsis (...)",
                                        op="getitem")
            ellipsis = True
    ndim = x.ndim
    if consumed > ndim:
        raise ShapeIndexError(f"getitem: too many indices for tensor of dimension {ndim}",
                                op="getitem", operands=[("input", describe(x))])
    basic, adv, in_dim, out_dim = [], {}, 0, 0
    for kind, v in items:
        if kind == _INT:
            basic.append(v)
            in_dim += 1
        elif kind == _SLICE:
            basic.append(v)
            in_dim += 1
            out_dim += 1
        elif kind == _NONE:
            basic.append(None)
            out_dim += 1
        elif kind == _ELLIPSIS:
            k = ndim - consumed
            basic.extend([_FULL] * k)
            in_dim += k
            out_dim += k
        elif kind == _BOOL:  # a new dim of size 1 (True) or 0 (False), indexed in advance
            basic.append(None)
            adv[out_dim] = host.zeros(1 if v else 0, INTP)
            out_dim += 1
        elif kind == _ADV:
            basic.append(_FULL)
            adv[out_dim] = v
            in_dim += 1
            out_dim += 1
        else:  # a mask: as many int arrays as it has dims
            k = v.ndim
            for j in range(k):
                same = dims_equal(v.shape[j], x.shape[in_dim + j])
                if not same:
                    raise ShapeRuntimeError(
                        f"getitem: the shape of the mask {format_shape(v.shape)} at index "
                        f"{in_dim} does not match the shape of the indexed tensor "
                        f"{format_shape(x.shape)} at index {in_dim}", op="getitem",
                        operands=[("input", describe(x)), ("mask", format_shape(v.shape))])
            for nz in v.nonzero():
                basic.append(_FULL)
                adv[out_dim] = nz
                out_dim += 1
            in_dim += k
    while basic and _is_full(basic[-1]):  # trailing whole dims change nothing
        basic.pop()
    if not adv:
        return tuple(basic), None
    device = x.device
    key = tuple(_on_device(adv.get(d), device) for d in range(max(adv) + 1))
    return tuple(basic), key


def _on_device(a, device):
    """An index array on the device: a host one (from a list or NumPy) moved there, except
    on a device that makes no arrays (meta), where its shape and bounds are still read."""
    if device.computes and isinstance(a, host.ndarray):
        return device.from_numpy(a)
    return a


def _is_full(b) -> bool:
    return type(b) is slice and b.start is None and b.stop is None and b.step is None


# ---- advanced indexing ----------------------------------------------------------------------
def advanced_index(shape, key, op: str = "index", x=None):
    """(out shape, key with negatives wrapped) for integer arrays (None = whole dim)."""
    if len(key) > len(shape):
        raise ShapeIndexError(
            f"{op}: too many indices for tensor of dimension {len(shape)}", op=op)
    norm, shapes, pos = [], [], []
    for d, a in enumerate(key):
        if a is None:
            norm.append(None)
            continue
        n = shape[d]
        if type(a) is not MetaIndex and a.size:
            lo, hi = a.min(), a.max()
            if type(n) is int and (lo < -n or hi >= n):
                bad = int(hi if hi >= n else lo)
                raise ShapeIndexError(
                    f"{op}: index {bad} is out of bounds for dim {d} with size {n}", op=op,
                    operands=[("input", describe(x) if x is not None else format_shape(shape))])
            if lo < 0 and type(n) is int:
                a = a + (a < 0) * n  # negatives wrapped, in the array's own namespace
            a = a.astype(INTP, copy=False)
        norm.append(a)
        shapes.append(tuple(a.shape))
        pos.append(d)
    b = shapes[0]
    for s in shapes[1:]:
        try:
            b = broadcast_shapes(b, s, op)
        except ShapeError:
            raise ShapeRuntimeError(
                f"{op}: shape mismatch: indexing tensors could not be broadcast together with "
                "shapes " + ", ".join(format_shape(s) for s in shapes), op=op,
                operands=[("input", describe(x) if x is not None else format_shape(shape))]
            ) from None
    rest = [s for d, s in enumerate(shape) if d not in pos]
    if pos == list(range(pos[0], pos[-1] + 1)):  # adjacent: the result goes where they are
        p = pos[0]
        out = tuple(shape[:p]) + tuple(b) + tuple(rest[p:])
    else:
        out = tuple(b) + tuple(rest)
    return out, tuple(norm)


def _np_key(key) -> tuple:
    return tuple(_FULL if a is None else a for a in key)


class AdvancedIndex(Op):
    """x[i0, :, i2, ...] for integer arrays: a copy."""

    name = "index"

    def __init__(self, key) -> None:
        self.key = key

    def infer(self, x):
        shape, self.key = advanced_index(x.shape, self.key, self.name, x)
        self.in_shape = x.shape
        return shape, x.dtype

    def forward(self, x):
        return x[_np_key(self.key)]

    def backward(self, g):
        return (apply(IndexAccumulate(self.key, self.in_shape), g),)


class IndexAccumulate(Op):
    """The gradient of advanced indexing: g added into zeros (repeated indices add up)."""

    name = "index_backward"

    def __init__(self, key, in_shape) -> None:
        self.key, self.in_shape = key, in_shape

    def infer(self, g):
        return self.in_shape, g.dtype

    def forward(self, g):
        xp = self.device.xp
        out = xp.zeros(self.in_shape, g.dtype)
        add_at(xp, out, _np_key(self.key), g)
        return out

    def backward(self, gg):
        return (apply(AdvancedIndex(self.key), gg),)


def index_parsed(x: Tensor, basic, adv) -> Tensor:
    """x indexed by a parsed key: the basic view, then the advanced copy."""
    if basic:
        x = _view_apply(Index(basic), x)
    if adv is not None:
        x = apply(AdvancedIndex(adv), x)
    return x


def getitem(x: Tensor, index) -> Tensor:
    """`x[index]` (Tensor.__getitem__)."""
    t = type(index)
    if t is int or t is slice:  # the common cases, without the parser
        return _view_apply(Index((index,)), x)
    if t is tuple and all(type(i) is int or type(i) is slice or i is None for i in index):
        return _view_apply(Index(index), x)
    basic, adv = parse_index(x, index)
    if not basic and adv is None:
        return _view_apply(Index(()), x)  # x[...] or x[:]: an alias, as in PyTorch
    return index_parsed(x, basic, adv)


# ---- writing: index_put and __setitem__ ----------------------------------------------------
def _region_shape(shape, basic, adv, op: str, x=None) -> tuple:
    shape, basic = basic_index(shape, basic, op, x)
    if adv is not None:
        shape, adv = advanced_index(shape, adv, op, x)
    return shape, basic, adv


def _value_shape(vshape, region, op: str, x=None, value=None) -> tuple:
    """The value's shape without leading 1s beyond the region's dims; checks it broadcasts."""
    vshape = tuple(vshape)
    while len(vshape) > len(region) and type(vshape[0]) is int and vshape[0] == 1:
        vshape = vshape[1:]
    ok = len(vshape) <= len(region)
    if ok:
        for v, r in zip(reversed(vshape), reversed(region)):
            if not (type(v) is int and v == 1) and not dims_equal(v, r):
                ok = False
                break
    if not ok:
        raise ShapeRuntimeError(
            f"{op}: shape mismatch: value of shape {format_shape(vshape)} cannot be broadcast "
            f"to the indexing result of shape {format_shape(region)}", op=op,
            operands=[("self", describe(x) if x is not None else "?"),
                      ("value", describe(value) if value is not None else format_shape(vshape))])
    return vshape


def _write(xp, out, basic, adv, value, accumulate: bool) -> None:
    region = out[tuple(basic) + (Ellipsis,)]
    if adv is None:
        if accumulate:
            region += value
        else:
            region[...] = value
    elif accumulate:
        add_at(xp, region, _np_key(adv), value)
    else:
        region[_np_key(adv)] = value  # repeated indices: the last write wins, as NumPy


class IndexPut(Op):
    """x with value written (or added) at a parsed index: the functional form of setitem."""

    name = "index_put"

    def __init__(self, basic, adv, accumulate: bool = False) -> None:
        self.basic, self.adv, self.accumulate = basic, adv, accumulate

    def infer(self, x, value):
        region, self.basic, self.adv = _region_shape(x.shape, self.basic, self.adv, self.name, x)
        self.vshape = _value_shape(value.shape, region, self.name, x, value)
        self.value_shape = value.shape
        return x.shape, x.dtype

    def saved(self, x, value, out):
        self.need_x = x.requires_grad
        return ()

    def forward(self, x, value):
        xp = self.device.xp
        out = xp.array(x, copy=True)
        _write(xp, out, self.basic, self.adv, value.reshape(self.vshape), self.accumulate)
        return out

    def backward(self, g):
        gx = None
        if self.need_x:
            gx = g if self.accumulate else apply(
                IndexPut(self.basic, self.adv), g, _zero_like(g))
        gv = index_parsed(g, self.basic, self.adv)
        if gv.ndim < len(self.value_shape):  # the value had leading 1s beyond the region
            gv = gv.reshape((1,) * (len(self.value_shape) - gv.ndim) + tuple(gv.shape))
        return gx, gv


def _zero_like(g: Tensor) -> Tensor:
    return Tensor._make(g.device.zeros((), g.dtype.np), (), g.dtype, g.device)


def _value_tensor(value, x: Tensor) -> Tensor:
    """The value as a tensor of x's dtype on x's device (PyTorch casts silently)."""
    if not isinstance(value, Tensor):
        if isinstance(value, host.ndarray):  # a host NumPy array: onto x's device
            value = Tensor._make(x.device.from_numpy(value), value.shape,
                                 _dt.from_numpy_dtype(value.dtype), x.device)
        else:
            try:
                arr = host.asarray(value, dtype=x.dtype.np)
            except (TypeError, ValueError):
                raise DTypeError(f"__setitem__: cannot write a {type(value).__name__} into "
                                 f"{describe(x)}", op="__setitem__") from None
            return Tensor._make(x.device.from_numpy(arr), arr.shape, x.dtype, x.device)
    if value.dtype is not x.dtype:
        value = value.to(x.dtype)
    return value


@public(method=True)
def index_put(x: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """`torch.index_put`: x with values at the tuple of index tensors `indices`."""
    basic, adv = parse_index(x, tuple(indices))
    return apply(IndexPut(basic, adv, accumulate), x, _value_tensor(values, x))


@public(sf=False, method=True)
def index_put_(x: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    from ..inplace import inplace

    basic, adv = parse_index(x, tuple(indices))

    def put(src, v):
        return apply(IndexPut(basic, adv, accumulate), src, v)

    return inplace(x, "index_put_", put, _value_tensor(values, x))


def setitem(x: Tensor, index, value) -> None:
    """`x[index] = value` (Tensor.__setitem__): in place; the graph follows where it must."""
    basic, adv = parse_index(x, index)
    needs_graph = (grad_mode.hot.quiet or grad_mode.state.enabled) and (
        x.requires_grad or (isinstance(value, Tensor) and value.requires_grad))
    if needs_graph:
        from ..inplace import inplace

        def put(src, v):
            return apply(IndexPut(basic, adv), src, v)

        inplace(x, "__setitem__", put, _value_tensor(value, x))
        return
    region, basic, adv = _region_shape(x.shape, basic, adv, "__setitem__", x)
    if isinstance(value, Tensor):
        # writing into a tensor without data (meta) takes a value from any device
        if value.device is not x.device and x.device.computes:
            raise DeviceError(f"__setitem__: the value {describe(value)} is on another device "
                              f"than {describe(x)}", op="__setitem__")
        vshape = _value_shape(value.shape, region, "__setitem__", x, value)
        arr = None if value._data is None else value._data.reshape(vshape)
    elif isinstance(value, host.ndarray):  # host values: onto x's device
        arr = x.device.from_numpy(value.reshape(_value_shape(value.shape, region,
                                                             "__setitem__", x)))
    else:
        arr = value
        if not isinstance(value, (int, float, bool, host.generic)):
            arr = host.asarray(value)
            arr = x.device.from_numpy(arr.reshape(_value_shape(arr.shape, region,
                                                               "__setitem__", x)))
    if x._data is not None:
        _write(x.device.xp, x._data, basic, adv, arr, False)
    x._version[0] += 1
    x._version[1] = "__setitem__"


__getitem__ = public(sf=False, method="__getitem__")(getitem)
__setitem__ = public(sf=False, method="__setitem__")(setitem)
