"""Movement ops: views and rearrangements of data (reshape, expand, permute, ...)."""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as _dt
from ..errors import DTypeError, ShapeError
from ..shape import (
    broadcast_shapes,
    dims_equal,
    format_shape,
    is_concrete,
    normalize_dim,
    normalize_dims,
    prod_dims,
    shapes_equal,
)
from ..tensor import Tensor, describe
from . import meta_layout
from .base import X1, Op, apply


class View(Op):
    """An op whose output may share the input's memory (so it shares its version counter)."""

    is_view = True

    def meta_layout(self, arr: np.ndarray) -> np.ndarray | None:
        """The op on a meta layout array (a view, or None where NumPy would copy)."""
        return self.forward(arr)


def _view_apply(op: View, x: Tensor) -> Tensor:
    out = apply(op, x)
    if out.data is None:
        if not meta_layout.view(op, x, out):
            return out  # NumPy would copy here: the meta tensor gets memory of its own
        out._version = x._version
        out._base = x if x._base is None else x._base
    elif np.may_share_memory(out.data, x.data):
        out._version = x._version  # in-place changes through either are seen by both
        out._base = x if x._base is None else x._base
    return out


def infer_reshape(shape, target, op: str = "reshape") -> tuple:
    """The target shape with one -1 solved; ShapeError if the sizes cannot match."""
    target = tuple(target)
    n = prod_dims(shape)
    if target.count(-1) > 1:
        raise ShapeError(f"{op}: only one dim can be -1, got {format_shape(target)}", op=op)
    if -1 in target:
        known = prod_dims(s for s in target if not (type(s) is int and s == -1))
        if is_concrete(shape) and is_concrete(target):
            if known == 0 or n % known:
                raise _reshape_error(op, shape, target)
            missing = n // known
        else:
            from ..symbolic import exact_div

            missing = exact_div(n, known)
        target = tuple(missing if (type(s) is int and s == -1) else s for s in target)
    for s in target:
        if type(s) is int and s < 0:
            raise ShapeError(f"{op}: invalid size {s} in {format_shape(target)}", op=op)
    from ..shape import dims_equal

    same = dims_equal(prod_dims(target), n)
    if same is None:
        raise ShapeError(
            f"{op}: cannot tell whether {format_shape(shape)} ({n} elements) fits "
            f"{format_shape(target)}", op=op, hint="bind the symbols or state a fact")
    if not same:
        raise _reshape_error(op, shape, target)
    return target


def _factor(n: int) -> str:
    fs, d = [], 2
    while d * d <= n:
        while n % d == 0:
            fs.append(d)
            n //= d
        d += 1
    if n > 1:
        fs.append(n)
    return " x ".join(str(f) for f in fs) or "1"


def _reshape_error(op, shape, target) -> ShapeError:
    n = prod_dims(shape)
    m = prod_dims(s for s in target if not (type(s) is int and s == -1))
    hint = None
    if type(n) is int:
        hint = f"{n} = {_factor(n)}" if n > 1 else None
    return ShapeError(
        f"{op}: cannot reshape {format_shape(shape)} ({n} elements) into "
        f"{format_shape(target)}" + (f" ({m} elements)" if -1 not in target else ""),
        op=op, operands=[("input", format_shape(shape))],
        hint=hint and f"the element count factors as {hint}; the new shape must multiply to {n}",
    )


class Reshape(View):
    name = "reshape"

    def __init__(self, shape) -> None:
        self.target = shape

    def infer(self, x):
        self.in_shape = x.shape
        self.out_shape = infer_reshape(x.shape, self.target, self.name)
        return self.out_shape, x.dtype

    def forward(self, x):
        return x.reshape(self.out_shape)

    def meta_layout(self, arr):
        return meta_layout.reshape_layout(arr, self.out_shape)

    def backward(self, g):
        return (g.reshape(self.in_shape),)


class Expand(View):
    name = "expand"

    def __init__(self, shape) -> None:
        self.target = tuple(shape)

    def infer(self, x):
        target, n = self.target, len(self.target)
        if n < x.ndim:
            raise ShapeError(
                f"expand: the target {format_shape(target)} has fewer dims than the input "
                f"{format_shape(x.shape)}", op="expand", operands=[("input", describe(x))])
        lead = n - x.ndim
        out = list(target[:lead])
        for s, t in zip(x.shape, target[lead:]):
            if type(t) is int and t == -1:
                out.append(s)
            elif type(s) is int and s == 1:
                out.append(t)
            elif s is t or s == t:
                out.append(s)
            else:
                raise ShapeError(
                    f"expand: cannot expand {format_shape(x.shape)} to {format_shape(target)} "
                    f"(size {s} is not 1 and differs from {t})",
                    op="expand", operands=[("input", describe(x))],
                    hint="only size-1 dims can be expanded; use repeat() to copy data")
        self.in_shape = x.shape
        self.out_shape = tuple(out)
        return self.out_shape, x.dtype

    def forward(self, x):
        return np.broadcast_to(x, self.out_shape)

    def backward(self, g):
        return (g,)  # the engine sums g back to the input's shape


class Permute(View):
    name = "permute"

    def __init__(self, dims) -> None:
        self.dims = tuple(dims)

    def infer(self, x):
        n = x.ndim
        dims = tuple(d + n if d < 0 else d for d in self.dims)
        if sorted(dims) != list(range(n)):
            raise ShapeError(
                f"permute: dims {self.dims} are not a permutation of {n} dims",
                op="permute", operands=[("input", describe(x))])
        self.dims = dims
        return tuple(x.shape[d] for d in dims), x.dtype

    def forward(self, x):
        return np.transpose(x, self.dims)

    def backward(self, g):
        return (g.permute(tuple(np.argsort(self.dims).tolist())),)


def reshape(x: Tensor, *shape) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if shapes_equal(shape, x.shape):
        return _view_apply(Reshape(shape), x) if x.requires_grad else x
    return _view_apply(Reshape(shape), x)


def view(x: Tensor, *shape) -> Tensor:
    return reshape(x, *shape)


def expand(x: Tensor, *shape) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if shapes_equal(tuple(shape), x.shape):
        return x
    return _view_apply(Expand(shape), x)


def broadcast_to(x: Tensor, shape) -> Tensor:
    return expand(x, tuple(shape))


def permute(x: Tensor, *dims) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return _view_apply(Permute(dims), x)


def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    from ..shape import normalize_dim

    n = x.ndim
    if n < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return x
    d0, d1 = normalize_dim(dim0, n, "transpose"), normalize_dim(dim1, n, "transpose")
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, dims)


def unsqueeze(x: Tensor, dim: int) -> Tensor:
    from ..shape import normalize_dim

    d = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    shape = tuple(x.shape)
    return _view_apply(Reshape(shape[:d] + (1,) + shape[d:]), x)


def squeeze(x: Tensor, dim=None) -> Tensor:
    from ..shape import normalize_dims

    shape = tuple(x.shape)
    if dim is None:
        dims = {i for i, s in enumerate(shape) if type(s) is int and s == 1}
    else:
        dims = {d for d in normalize_dims(dim, x.ndim, "squeeze")
                if type(shape[d]) is int and shape[d] == 1}
    if not dims:
        return x
    return _view_apply(Reshape(tuple(s for i, s in enumerate(shape) if i not in dims)), x)


class Clone(Op):
    name = "clone"

    def infer(self, x):
        return x.shape, x.dtype

    def forward(self, x):
        return np.array(x, copy=True, order="C")

    def backward(self, g):
        return (g,)


def clone(x: Tensor) -> Tensor:
    return apply(Clone(), x)


def contiguous(x: Tensor) -> Tensor:
    if x.data is None:
        return x if meta_layout.is_contiguous(x) else clone(x)
    if x.data.flags.c_contiguous:
        return x
    return clone(x)


# ---- reshaping composites ---------------------------------------------------------------
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if x.ndim == 0:
        return reshape(x, (1,))
    s = normalize_dim(start_dim, x.ndim, "flatten")
    e = normalize_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise ShapeError(f"flatten: start_dim {start_dim} cannot come after end_dim {end_dim}",
                         op="flatten", operands=[("input", describe(x))])
    if s == e:
        return x
    shape = tuple(x.shape)
    return reshape(x, shape[:s] + (prod_dims(shape[s:e + 1]),) + shape[e + 1:])


def unflatten(x: Tensor, dim: int, sizes) -> Tensor:
    d = normalize_dim(dim, x.ndim, "unflatten")
    shape = tuple(x.shape)
    sizes = infer_reshape((shape[d],), tuple(sizes), "unflatten")
    return reshape(x, shape[:d] + sizes + shape[d + 1:])


def movedim(x: Tensor, source, destination) -> Tensor:
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    n = x.ndim
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {src} and destination {dst} have different lengths",
                         op="movedim")
    src = [normalize_dim(d, n, "movedim") for d in src]
    dst = [normalize_dim(d, n, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(f"movedim: repeated dim in source {src} or destination {dst}",
                         op="movedim")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return permute(x, order) if order != list(range(n)) else x


moveaxis = movedim


def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    return transpose(x, axis0, axis1)


swapdims = swapaxes


# ---- basic indexing: a view selecting ints / slices, adding None dims -------------------
def _as_bound(b, op: str):
    """A slice bound or index as an int (or a symbolic dim); None stays None."""
    if b is None or type(b) is int:
        return b
    from ..symbolic import is_symbolic

    if is_symbolic(b):
        return b
    if isinstance(b, (float, bool)) or (isinstance(b, Tensor) and b.dtype.category != 1):
        raise DTypeError(f"{op}: indices must be integers or None, got {b!r}", op=op)
    try:
        return operator.index(b)
    except TypeError:
        raise DTypeError(f"{op}: indices must be integers or None, got {b!r}",
                         op=op) from None


def slice_size(s: slice, n, op: str = "getitem"):
    """(normalized slice, size) of slicing a dim of size n (int or symbolic)."""
    step = 1 if s.step is None else _as_bound(s.step, op)
    if type(step) is not int or step <= 0:
        raise ShapeError(f"{op}: step must be greater than zero, got {step}", op=op,
                         hint="negative steps are not supported (as in PyTorch); use flip()")
    start, stop = _as_bound(s.start, op), _as_bound(s.stop, op)
    if type(n) is int and (start is None or type(start) is int) and (
            stop is None or type(stop) is int):
        start, stop, step = slice(start, stop, step).indices(n)
        return slice(start, stop, step), len(range(start, stop, step))
    # A symbolic size (or bound): a bound that may lie outside the dim is taken to lie inside.
    start = 0 if start is None else _sym_bound(start, n)
    stop = n if stop is None else _sym_bound(stop, n)
    length = stop - start
    size = length if step == 1 else (length + (step - 1)) // step
    if type(size) is int and size < 0:
        size = 0
    return slice(start, stop, step), size


def _sym_bound(b, n):
    """A slice bound on a dim of symbolic size n, clamped where the comparison is decided."""
    from ..symbolic import dim_le

    if type(b) is int and b < 0:
        b = n + b
        return 0 if dim_le(b, 0) else b
    return n if dim_le(n, b) else b


def basic_index(shape, key, op: str = "getitem", x=None):
    """(out shape, normalized key) for a key of ints, slices and None (no Ellipsis)."""
    out, norm, d, ndim = [], [], 0, len(shape)
    for item in key:
        if item is None:
            norm.append(None)
            out.append(1)
            continue
        if d >= ndim:
            raise ShapeError(
                f"{op}: too many indices for tensor of dimension {ndim}", op=op,
                operands=[("input", describe(x) if x is not None else format_shape(shape))])
        n = shape[d]
        if type(item) is slice:
            item, size = slice_size(item, n, op)
            out.append(size)
        elif type(n) is int:
            i = item
            if type(i) is int and not -n <= i < n:
                raise ShapeError(
                    f"{op}: index {i} is out of bounds for dim {d} with size {n}", op=op,
                    operands=[("input", describe(x) if x is not None else format_shape(shape))])
            item = i + n if i < 0 else i
        elif type(item) is int and item < 0:
            item = n + item  # symbolic size: the int is taken to be in range
        norm.append(item)
        d += 1
    out.extend(shape[d:])
    return tuple(out), tuple(norm)


class Index(View):
    """x[key] for ints, slices (step > 0) and None: a view."""

    name = "getitem"
    slice_backward = True

    def __init__(self, key, name: str = "getitem") -> None:
        self.key, self.name = key, name

    def infer(self, x):
        shape, self.key = basic_index(x.shape, self.key, self.name, x)
        self.in_shape = x.shape
        return shape, x.dtype

    def forward(self, x):
        return x[self.key + (Ellipsis,)]  # the Ellipsis keeps a 0-d result a view

    def backward(self, g):
        return (apply(IndexBackward(self.key, self.in_shape), g),)


class IndexBackward(Op):
    """The gradient of basic indexing: g written into zeros of the input's shape."""

    name = "getitem_backward"

    def __init__(self, key, in_shape) -> None:
        self.key, self.in_shape = key, in_shape

    def infer(self, g):
        return self.in_shape, g.dtype

    def forward(self, g):
        out = np.zeros(self.in_shape, g.dtype)
        out[self.key + (Ellipsis,)] = g
        return out

    def backward(self, gg):
        return (_view_apply(Index(self.key), gg),)


def _index_view(x: Tensor, key, name: str) -> Tensor:
    return _view_apply(Index(key, name), x)


def narrow(x: Tensor, dim: int, start, length) -> Tensor:
    d = normalize_dim(dim, x.ndim, "narrow")
    n = x.shape[d]
    start, length = _as_bound(start, "narrow"), _as_bound(length, "narrow")
    if type(start) is int and start < 0:
        start = start + n
    if type(n) is int and type(start) is int and type(length) is int and (
            start < 0 or length < 0 or start + length > n):
        raise ShapeError(
            f"narrow: start ({start}) + length ({length}) is out of range for dim {d} of "
            f"size {n}", op="narrow", operands=[("input", describe(x))])
    return _index_view(x, (slice(None),) * d + (slice(start, start + length),), "narrow")


def select(x: Tensor, dim: int, index) -> Tensor:
    d = normalize_dim(dim, x.ndim, "select")
    return _index_view(x, (slice(None),) * d + (_as_bound(index, "select"),), "select")


def unbind(x: Tensor, dim: int = 0) -> tuple:
    d = normalize_dim(dim, x.ndim, "unbind")
    n = x.shape[d]
    if type(n) is not int:
        raise ShapeError(f"unbind: dim {d} has symbolic size {n}: the number of outputs is "
                         "unknown", op="unbind", operands=[("input", describe(x))])
    pre = (slice(None),) * d
    return tuple(_index_view(x, pre + (i,), "unbind") for i in range(n))


def _split_sizes(x: Tensor, d: int, split_size, op: str) -> list:
    n = x.shape[d]
    if type(split_size) is int:
        if split_size < 0:
            raise ShapeError(f"{op}: split_size must be non-negative, got {split_size}", op=op)
        if type(n) is int:
            if split_size == 0:
                if n:
                    raise ShapeError(f"{op}: split_size 0 cannot split a dim of size {n}",
                                     op=op, operands=[("input", describe(x))])
                return [0]
            k = max(-(-n // split_size), 1)
            return [split_size] * (k - 1) + [n - split_size * (k - 1)]
    # symbolic size or split size: only an exact division is known
    q = n // split_size
    if type(q) is int and q > 0 and dims_equal(q * split_size, n):
        return [split_size] * q
    if dims_equal(split_size, n):
        return [n]
    raise ShapeError(
        f"{op}: cannot tell how many pieces of size {split_size} dim {d} of size {n} makes",
        op=op, operands=[("input", describe(x))],
        hint="pass the list of section sizes, or split a dim that is a multiple of the size")


def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    d = normalize_dim(dim, x.ndim, "split")
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_as_bound(s, "split") for s in split_size_or_sections]
        for s in sizes:
            if type(s) is int and s < 0:
                raise ShapeError(f"split: section sizes must be non-negative, got {sizes}",
                                 op="split")
        total = prod_dims(()) * 0
        for s in sizes:
            total = total + s
        same = dims_equal(total, x.shape[d])
        if not same:
            raise ShapeError(
                f"split: section sizes {sizes} sum to {total}, not to the size {x.shape[d]} "
                f"of dim {d}" if same is False else
                f"split: cannot tell whether section sizes {sizes} sum to {x.shape[d]}",
                op="split", operands=[("input", describe(x))])
    else:
        sizes = _split_sizes(x, d, _as_bound(split_size_or_sections, "split"), "split")
    pre, out, start = (slice(None),) * d, [], 0
    for s in sizes:
        out.append(_index_view(x, pre + (slice(start, start + s),), "split"))
        start = start + s
    return tuple(out)


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    if type(chunks) is not int or chunks <= 0:
        raise ShapeError(f"chunk: chunks must be a positive int, got {chunks!r}", op="chunk")
    d = normalize_dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    if type(n) is int:
        size = -(-n // chunks)
        if size == 0:  # an empty dim: `chunks` empty pieces, as PyTorch
            return split(x, [0] * chunks, d)
        return split(x, size, d)
    return split(x, n // chunks, d)


# ---- cat / stack ------------------------------------------------------------------------
def _is_legacy_empty(t: Tensor) -> bool:
    """A 1-d tensor of size 0: PyTorch's cat skips it whatever the other shapes."""
    return t.ndim == 1 and type(t.shape[0]) is int and t.shape[0] == 0


class Cat(Op):
    name = "cat"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, *xs):
        for i, t in enumerate(xs):
            if t.ndim == 0:
                raise ShapeError(f"cat: a 0-d tensor (at position {i}) cannot be concatenated",
                                 op="cat", operands=[(f"tensor {i}", describe(t))],
                                 hint="use stack(), or unsqueeze(0) it first")
        dtype = xs[0].dtype
        for t in xs[1:]:
            dtype = promote_types(dtype, t.dtype)
        self.dtype = dtype
        self.keep = [not _is_legacy_empty(t) for t in xs]
        kept = [t for t, k in zip(xs, self.keep) if k]
        if not kept:
            self.d = 0
            self.sizes = [0] * len(xs)
            return (0,), dtype
        ref = kept[0]
        i_ref = self.keep.index(True)
        d = self.d = normalize_dim(self.dim, ref.ndim, "cat")
        operands = [(f"tensor {i}", describe(t)) for i, t in enumerate(xs)]
        total = 0
        for i, t in enumerate(xs):
            if not self.keep[i]:
                continue
            if t.ndim != ref.ndim:
                raise ShapeError(
                    f"cat: tensors must have the same number of dims: tensor {i_ref} has "
                    f"{ref.ndim}, tensor {i} has {t.ndim}", op="cat", operands=operands)
            for j, (s, r) in enumerate(zip(t.shape, ref.shape)):
                if j == d:
                    continue
                same = dims_equal(s, r)
                if not same:
                    why = "cannot tell whether" if same is None else "must match:"
                    raise ShapeError(
                        f"cat: sizes must match except in dim {d}: tensor {i} has size {s} "
                        f"in dim {j}, tensor {i_ref} has {r}" + (
                            f" ({why} {s} == {r})" if same is None else ""),
                        op="cat", operands=operands,
                        hint=f"only dim {d} may differ; did you mean cat(..., dim={j})?")
            total = total + t.shape[d]
        self.sizes = [t.shape[d] if k else 0 for t, k in zip(xs, self.keep)]
        shape = list(ref.shape)
        shape[d] = total
        return tuple(shape), dtype

    def forward(self, *arrays):
        npd = self.dtype.np
        parts = [a if a.dtype == npd else a.astype(npd)
                 for a, k in zip(arrays, self.keep) if k]
        if not parts:
            return np.zeros((0,), npd)
        return np.concatenate(parts, axis=self.d)

    def backward(self, g):
        from ..factories import zeros

        grads, start, pre = [], 0, (slice(None),) * self.d
        for size, keep in zip(self.sizes, self.keep):
            if not keep:
                grads.append(zeros(0, dtype=g.dtype, device=g.device))
                continue
            grads.append(_view_apply(Index(pre + (slice(start, start + size),), "cat_backward"),
                                     g))
            start = start + size
        return tuple(grads)


def promote_types(a, b):
    return _dt.promote_types(a, b)


def _tensor_list(tensors, op: str) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise DTypeError(f"{op}: expected a list or tuple of tensors, got "
                         f"{type(tensors).__name__}", op=op)
    if not tensors:
        raise ShapeError(f"{op}: expected a non-empty list of tensors", op=op)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise DTypeError(f"{op}: expected a Tensor as element {i}, got "
                             f"{type(t).__name__}", op=op)
    return list(tensors)


def cat(tensors, dim: int = 0) -> Tensor:
    return apply(Cat(dim), *_tensor_list(tensors, "cat"))


concat = concatenate = cat


def stack(tensors, dim: int = 0) -> Tensor:
    tensors = _tensor_list(tensors, "stack")
    ref = tensors[0]
    for i, t in enumerate(tensors[1:], 1):
        same = t.ndim == ref.ndim and all(dims_equal(a, b) for a, b in zip(t.shape, ref.shape))
        if not same:
            raise ShapeError(
                f"stack: expects each tensor to be equal size, but got "
                f"{format_shape(ref.shape)} at entry 0 and {format_shape(t.shape)} at entry {i}",
                op="stack", operands=[(f"tensor {j}", describe(u)) for j, u in
                                      enumerate(tensors)])
    d = normalize_dim(dim, ref.ndim + 1, "stack")
    return apply(Cat(d), *[unsqueeze(t, d) for t in tensors])


# ---- copies: repeat, flip, tril / triu --------------------------------------------------
class Repeat(Op):
    name = "repeat"

    def __init__(self, sizes) -> None:
        self.sizes = tuple(sizes)

    def infer(self, x):
        k = len(self.sizes)
        if k < x.ndim:
            raise ShapeError(
                f"repeat: {k} repeat sizes {self.sizes} are fewer than the tensor's {x.ndim} dims",
                op="repeat", operands=[("input", describe(x))])
        for r in self.sizes:
            if type(r) is not int or r < 0:
                raise ShapeError(f"repeat: repeat sizes must be non-negative ints, got "
                                 f"{self.sizes}", op="repeat")
        self.in_shape = x.shape
        self.padded = (1,) * (k - x.ndim) + tuple(x.shape)
        return tuple(s * r for s, r in zip(self.padded, self.sizes)), x.dtype

    def forward(self, x):
        return np.tile(x.reshape(self.padded), self.sizes)

    def backward(self, g):
        split = []
        for r, s in zip(self.sizes, self.padded):
            split += [r, s]
        g = g.reshape(tuple(split)).sum(dim=tuple(range(0, len(split), 2)))
        return (g.reshape(tuple(self.in_shape)),)


def repeat(x: Tensor, *sizes) -> Tensor:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    return apply(Repeat(sizes), x)


class Flip(Op):
    name = "flip"

    def __init__(self, dims) -> None:
        self.dims = dims

    def infer(self, x):
        self.axes = normalize_dims(self.dims, x.ndim, "flip") if x.ndim else ()
        return x.shape, x.dtype

    def forward(self, x):
        return np.flip(x, self.axes).copy() if self.axes else x.copy()

    def backward(self, g):
        return (apply(Flip(self.axes), g),)


def flip(x: Tensor, dims) -> Tensor:
    return apply(Flip((dims,) if isinstance(dims, int) else tuple(dims)), x)


class Tril(Op):
    name = "tril"
    fn = staticmethod(np.tril)

    def __init__(self, diagonal: int = 0) -> None:
        self.diagonal = diagonal

    def infer(self, x):
        if x.ndim < 2:
            raise ShapeError(f"{self.name}: the input must have at least 2 dims, got "
                             f"{describe(x)}", op=self.name, operands=[("input", describe(x))])
        return x.shape, x.dtype

    def forward(self, x):
        return self.fn(x, self.diagonal)

    def backward(self, g):
        return (apply(type(self)(self.diagonal), g),)


class Triu(Tril):
    name = "triu"
    fn = staticmethod(np.triu)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    return apply(Tril(diagonal), x)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    return apply(Triu(diagonal), x)


# ---- gather / scatter / index_select / index_add ----------------------------------------
def _check_index_dtype(index: Tensor, op: str) -> None:
    if not isinstance(index, Tensor):
        raise DTypeError(f"{op}: index must be an integer tensor, got {type(index).__name__}",
                         op=op)
    if index.dtype.category != 1:
        raise DTypeError(f"{op}: index must be an integer tensor, got {index.dtype}", op=op,
                         operands=[("index", describe(index))], hint="convert with .long()")


def _check_bounds(index: np.ndarray, n: int, d: int, op: str) -> None:
    """Index values must lie in [0, n) (gather/scatter/index_select do not wrap negatives)."""
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = index.min() if index.min() < 0 else index.max()
        raise ShapeError(f"{op}: index {bad} is out of bounds for dim {d} with size {n}",
                         op=op)


def _le(a, b) -> bool:
    """a <= b where both are ints; equal dims are fine; unknown symbolic pairs pass."""
    if type(a) is int and type(b) is int:
        return a <= b
    from ..symbolic import dim_le

    return dim_le(a, b) is not False


def _scatter_coords(index: np.ndarray, dim: int) -> tuple:
    coords = list(np.indices(index.shape, sparse=True))
    coords[dim] = index
    return tuple(coords)


class Gather(Op):
    name = "gather"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x, index):
        _check_index_dtype(index, "gather")
        nd = max(x.ndim, 1)
        if max(index.ndim, 1) != nd:
            raise ShapeError(
                f"gather: index must have as many dims as the input: {index.ndim} vs {x.ndim}",
                op="gather", operands=[("input", describe(x)), ("index", describe(index))])
        self.d = normalize_dim(self.dim, x.ndim, "gather")
        for j, (i, s) in enumerate(zip(index.shape, x.shape)):
            if j != self.d and not _le(i, s):
                raise ShapeError(
                    f"gather: index size {i} exceeds the input's size {s} in dim {j} "
                    f"(only dim {self.d} may be larger)", op="gather",
                    operands=[("input", describe(x)), ("index", describe(index))])
        self.in_shape = x.shape
        return index.shape, x.dtype

    def saved(self, x, index, out):
        return (X1,)

    def forward(self, x, index):
        if x.ndim == 0:
            _check_bounds(index, 1, 0, "gather")
            return x.reshape(1)[index.reshape(1)].reshape(())
        _check_bounds(index, x.shape[self.d], self.d, "gather")
        lim = tuple(slice(None) if j == self.d else slice(0, s) for j, s in
                    enumerate(index.shape))
        return np.take_along_axis(x[lim], index.astype(np.intp, copy=False), axis=self.d)

    def backward(self, g):
        from ..factories import zeros

        (index,) = self.saved_tensors
        base = zeros(tuple(self.in_shape), dtype=g.dtype, device=g.device)
        return scatter_add(base, self.d, index, g), None


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    return apply(Gather(dim), x, index)


def _pad_to(g: Tensor, shape) -> Tensor:
    """g padded with zeros at the end of each dim up to shape."""
    widths = []
    for s, n in zip(reversed(tuple(g.shape)), reversed(tuple(shape))):
        widths += [0, n - s]
    if not any(type(w) is not int or w for w in widths):
        return g
    return pad(g, tuple(widths))


class ScatterAdd(Op):
    name = "scatter_add"
    accumulate = True

    def __init__(self, dim: int, value=None) -> None:
        self.dim, self.value = dim, value

    def infer(self, x, index, src=None):
        _check_index_dtype(index, self.name)
        nd = max(x.ndim, 1)
        operands = [("input", describe(x)), ("index", describe(index))]
        if src is not None:
            operands.append(("src", describe(src)))
            if src.dtype is not x.dtype:
                raise DTypeError(f"{self.name}: src dtype {src.dtype} must equal the input's "
                                 f"{x.dtype}", op=self.name, operands=operands)
            if max(src.ndim, 1) != nd:
                raise ShapeError(f"{self.name}: src must have as many dims as the input",
                                 op=self.name, operands=operands)
        if max(index.ndim, 1) != nd:
            raise ShapeError(f"{self.name}: index must have as many dims as the input",
                             op=self.name, operands=operands)
        self.d = normalize_dim(self.dim, x.ndim, self.name)
        for j, i in enumerate(index.shape):
            if (j != self.d and not _le(i, x.shape[j])) or (
                    src is not None and not _le(i, src.shape[j])):
                raise ShapeError(f"{self.name}: index size {i} in dim {j} exceeds the input's "
                                 "or src's size", op=self.name, operands=operands)
        self.index_shape = index.shape
        self.src_shape = None if src is None else src.shape
        return x.shape, x.dtype

    def saved(self, x, index, src=None, *, out):
        return (X1,)

    def forward(self, x, index, src=None):
        out = np.array(x, copy=True)
        if x.ndim == 0:
            out, index = out.reshape(1), index.reshape(1)
            if src is not None:
                src = src.reshape(1)
        _check_bounds(index, out.shape[self.d], self.d, self.name)
        coords = _scatter_coords(index.astype(np.intp, copy=False), self.d)
        if src is None:
            val = np.asarray(self.value, out.dtype)
        else:
            val = src[tuple(slice(0, s) for s in index.shape)]
        if self.accumulate:
            np.add.at(out, coords, val)
        else:
            out[coords] = val
        return out.reshape(x.shape)

    def backward(self, g):
        (index,) = self.saved_tensors
        gx = g if self.accumulate else apply(Scatter(self.d, 0), g, index)
        if self.src_shape is None:
            return gx, None
        gsrc = _pad_to(gather(g, self.d, index), self.src_shape)
        return gx, None, gsrc


class Scatter(ScatterAdd):
    name = "scatter"
    accumulate = False


def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    return apply(ScatterAdd(dim), x, index, src)


def scatter(x: Tensor, dim: int, index: Tensor, src=None, value=None) -> Tensor:
    """x with src (a tensor) or value (a number) written at index along dim."""
    if src is None and value is None:
        raise DTypeError("scatter: give src (a tensor) or value (a number)", op="scatter")
    if isinstance(src, Tensor):
        return apply(Scatter(dim), x, index, src)
    v = value if src is None else src
    return apply(Scatter(dim, v), x, index)


class IndexSelect(Op):
    name = "index_select"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x, index):
        _check_index_dtype(index, "index_select")
        if index.ndim > 1:
            raise ShapeError(f"index_select: index must be 1-d, got {describe(index)}",
                             op="index_select", operands=[("index", describe(index))])
        self.d = normalize_dim(self.dim, x.ndim, "index_select")
        self.in_shape = x.shape
        shape = list(x.shape)
        shape[self.d] = index.shape[0] if index.ndim else 1
        return tuple(shape), x.dtype

    def saved(self, x, index, out):
        return (X1,)

    def forward(self, x, index):
        index = index.reshape(-1).astype(np.intp, copy=False)
        _check_bounds(index, x.shape[self.d], self.d, "index_select")
        return np.take(x, index, axis=self.d)

    def backward(self, g):
        from ..factories import zeros

        (index,) = self.saved_tensors
        base = zeros(tuple(self.in_shape), dtype=g.dtype, device=g.device)
        return index_add(base, self.d, index, g), None


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    return apply(IndexSelect(dim), x, index)


class IndexAdd(Op):
    name = "index_add"

    def __init__(self, dim: int, alpha=1) -> None:
        self.dim, self.alpha = dim, alpha

    def infer(self, x, index, source):
        _check_index_dtype(index, "index_add")
        operands = [("input", describe(x)), ("index", describe(index)),
                    ("source", describe(source))]
        if index.ndim > 1:
            raise ShapeError("index_add: index must be 1-d", op="index_add", operands=operands)
        self.d = d = normalize_dim(self.dim, x.ndim, "index_add")
        want = list(x.shape)
        want[d] = index.shape[0] if index.ndim else 1
        if source.ndim != x.ndim or not all(
                dims_equal(a, b) for a, b in zip(source.shape, want)):
            raise ShapeError(f"index_add: source must have shape {format_shape(want)}",
                             op="index_add", operands=operands)
        return x.shape, x.dtype

    def saved(self, x, index, source, out):
        return (X1,)

    def forward(self, x, index, source):
        index = index.reshape(-1).astype(np.intp, copy=False)
        _check_bounds(index, x.shape[self.d], self.d, "index_add")
        out = np.array(x, copy=True)
        src = source if self.alpha == 1 else source * self.alpha
        np.add.at(out, (slice(None),) * self.d + (index,), src.astype(out.dtype, copy=False))
        return out

    def backward(self, g):
        (index,) = self.saved_tensors
        gs = index_select(g, self.d, index)
        return g, None, gs if self.alpha == 1 else gs * self.alpha


def index_add(x: Tensor, dim: int, index: Tensor, source: Tensor, alpha=1) -> Tensor:
    return apply(IndexAdd(dim, alpha), x, index, source)


# ---- masked_fill / pad ------------------------------------------------------------------
class MaskedFill(Op):
    name = "masked_fill"

    def __init__(self, value) -> None:
        self.value = value

    def infer(self, x, mask):
        if mask.dtype is not _dt.bool_:
            raise DTypeError(f"masked_fill: the mask must be bool, got {mask.dtype}",
                             op="masked_fill", operands=[("input", describe(x)),
                                                         ("mask", describe(mask))],
                             hint="compare first (x > 0), or convert with .bool()")
        shape = broadcast_shapes(x.shape, mask.shape, "masked_fill", ("input", "mask"))
        return shape, x.dtype

    def saved(self, x, mask, out):
        return (X1,)

    def forward(self, x, mask):
        return np.where(mask, np.asarray(self.value).astype(x.dtype), x)

    def backward(self, g):
        (mask,) = self.saved_tensors
        return apply(MaskedFill(0), g, mask), None


def masked_fill(x: Tensor, mask: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        value = value.item()  # the value gets no gradient
    if isinstance(mask, (np.ndarray, np.generic)):
        from ..tensor import from_numpy

        mask = from_numpy(np.asarray(mask))
    return apply(MaskedFill(value), x, mask)


def masked_fill_(t: Tensor, mask: Tensor, value) -> Tensor:
    from .inplace import inplace

    return inplace(t, "masked_fill_", masked_fill, mask, value)


class Pad(Op):
    """Constant padding (negative amounts crop), pads given last dim first as F.pad."""

    name = "pad"

    def __init__(self, pad, value=0) -> None:
        self.pad, self.value = tuple(pad), value

    def infer(self, x):
        p = self.pad
        if len(p) % 2:
            raise ShapeError(f"pad: the padding length must be divisible by 2, got {p}",
                             op="pad")
        if len(p) // 2 > x.ndim:
            raise ShapeError(f"pad: {len(p)} pad values need at least {len(p) // 2} dims, got "
                             f"{describe(x)}", op="pad", operands=[("input", describe(x))])
        pairs = [(0, 0)] * x.ndim
        for i in range(len(p) // 2):
            pairs[x.ndim - 1 - i] = (p[2 * i], p[2 * i + 1])
        self.pairs = pairs
        shape = []
        for s, (a, b) in zip(x.shape, pairs):
            n = s + a + b
            kept = s + min(a, 0) + min(b, 0)  # negative pads crop the input first
            if type(kept) is int and kept < 0:
                raise ShapeError(f"pad: padding {p} crops more than the size {s} of a dim",
                                 op="pad", operands=[("input", describe(x))])
            if type(n) is int and n < 0:
                raise ShapeError(f"pad: padding {p} makes a dim of size {s} negative",
                                 op="pad", operands=[("input", describe(x))])
            shape.append(n)
        return tuple(shape), x.dtype

    def forward(self, x):
        if any(a < 0 or b < 0 for a, b in self.pairs):
            x = x[tuple(slice(max(-a, 0), n - max(-b, 0)) for (a, b), n in
                        zip(self.pairs, x.shape))]
        width = [(max(a, 0), max(b, 0)) for a, b in self.pairs]
        return np.pad(x, width, constant_values=np.asarray(self.value).astype(x.dtype))

    def backward(self, g):
        return (apply(Pad(tuple(-v for v in self.pad), 0), g),)


def _pad_index(n: int, a: int, b: int, mode: str) -> np.ndarray:
    i = np.arange(-a, n + b)
    if mode == "reflect":
        if a >= n or b >= n:
            raise ShapeError(f"pad: reflect padding ({a}, {b}) must be smaller than the dim "
                             f"size {n}", op="pad")
        period = 2 * (n - 1)
        j = np.abs(i) % period if period else np.zeros_like(i)
        return np.where(j >= n, period - j, j)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if a > n or b > n:
        raise ShapeError(f"pad: circular padding ({a}, {b}) must not exceed the dim size {n}",
                         op="pad")
    return i % n


def pad(x: Tensor, pad, mode: str = "constant", value=0) -> Tensor:
    """F.pad: pad = (left, right) for the last dim, then the one before, ..."""
    pad = tuple(pad)
    if mode == "constant":
        return apply(Pad(pad, 0 if value is None else value), x)
    if mode not in ("reflect", "replicate", "circular"):
        raise ShapeError(f"pad: unknown mode {mode!r}", op="pad",
                         hint="use 'constant', 'reflect', 'replicate' or 'circular'")
    Pad(pad).infer(x)  # the same checks as constant padding
    from ..device import meta

    for i in range(len(pad) // 2):
        d, a, b = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        if a == 0 and b == 0:
            continue
        n = x.shape[d]
        if type(n) is not int or n == 0 or a < 0 or b < 0:
            raise ShapeError(f"pad: {mode} padding needs a concrete non-empty dim and "
                             f"non-negative pads, got {n} and ({a}, {b})", op="pad")
        idx = _pad_index(n, a, b, mode)
        it = Tensor._make(None if x.device is meta else idx, idx.shape, _dt.int64, x.device)
        x = index_select(x, d, it)
    return x


METHODS = ("reshape", "view", "expand", "broadcast_to", "permute", "transpose", "unsqueeze",
           "squeeze", "clone", "contiguous", "flatten", "unflatten", "movedim", "moveaxis",
           "swapaxes", "swapdims", "narrow", "select", "unbind", "split", "chunk", "repeat",
           "flip", "tril", "triu", "gather", "scatter_add", "scatter", "index_select",
           "index_add", "masked_fill", "masked_fill_")
__all__ = [m for m in METHODS if m != "masked_fill_"] + [
    "cat", "concat", "concatenate", "stack", "pad"]
