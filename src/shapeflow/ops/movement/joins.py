"""Splitting a tensor into pieces (split, chunk) and joining pieces (cat, stack)."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeRuntimeError
from ...shape import dims_equal, format_shape, normalize_dim, prod_dims
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..registry import public
from .slicing import Index, _as_bound, _index_view, _no_dims
from .views import _view_apply, unsqueeze


def _split_sizes(x: Tensor, d: int, split_size, op: str) -> list:
    n = x.shape[d]
    if type(split_size) is int:
        if split_size < 0:
            raise ShapeRuntimeError(
                f"{op}: split_size must be non-negative, got {split_size}", op=op)
        if type(n) is int:
            if split_size == 0:
                if n:
                    raise ShapeRuntimeError(f"{op}: split_size 0 cannot split a dim of size {n}",
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
    raise ShapeRuntimeError(
        f"{op}: cannot tell how many pieces of size {split_size} dim {d} of size {n} makes",
        op=op, operands=[("input", describe(x))],
        hint="pass the list of section sizes, or split a dim that is a multiple of the size")


@public(method=True)
def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    _no_dims(x, "split")
    d = normalize_dim(dim, x.ndim, "split")
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_as_bound(s, "split") for s in split_size_or_sections]
        for s in sizes:
            if type(s) is int and s < 0:
                raise ShapeRuntimeError(f"split: section sizes must be non-negative, got {sizes}",
                                        op="split")
        total = prod_dims(()) * 0
        for s in sizes:
            total = total + s
        same = dims_equal(total, x.shape[d])
        if not same:
            raise ShapeRuntimeError(
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


@public(method=True)
def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple:
    if type(chunks) is not int or chunks <= 0:
        raise ShapeRuntimeError(f"chunk: chunks must be a positive int, got {chunks!r}", op="chunk")
    _no_dims(x, "chunk")
    d = normalize_dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    if type(n) is int:
        size = -(-n // chunks)
        if size == 0:  # an empty dim: `chunks` empty pieces, as PyTorch
            return split(x, [0] * chunks, d)
        return split(x, size, d)
    return split(x, n // chunks, d)


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
                raise ShapeRuntimeError(
                    f"cat: a 0-d tensor (at position {i}) cannot be concatenated",
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
                raise ShapeRuntimeError(
                    f"cat: tensors must have the same number of dims: tensor {i_ref} has "
                    f"{ref.ndim}, tensor {i} has {t.ndim}", op="cat", operands=operands)
            for j, (s, r) in enumerate(zip(t.shape, ref.shape)):
                if j == d:
                    continue
                same = dims_equal(s, r)
                if not same:
                    why = "cannot tell whether" if same is None else "must match:"
                    raise ShapeRuntimeError(
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
        npd, xp = self.dtype.np, self.device.xp
        parts = [a if a.dtype == npd else a.astype(npd)
                 for a, k in zip(arrays, self.keep) if k]
        if not parts:
            return xp.zeros((0,), npd)
        return xp.concatenate(parts, axis=self.d)

    def backward(self, g):
        from ...factories import zeros

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
        raise ShapeRuntimeError(f"{op}: expected a non-empty list of tensors", op=op)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            from ...torch_interop import is_torch_tensor, mixing_error

            if is_torch_tensor(t):
                raise mixing_error(t, f"{op} (element {i})")
            raise DTypeError(f"{op}: expected a Tensor as element {i}, got "
                             f"{type(t).__name__}", op=op)
    return list(tensors)


@public(sf=("cat", "concat", "concatenate"))
def cat(tensors, dim: int = 0) -> Tensor:
    return apply(Cat(dim), *_tensor_list(tensors, "cat"))


concat = concatenate = cat


@public()
def stack(tensors, dim: int = 0) -> Tensor:
    tensors = _tensor_list(tensors, "stack")
    ref = tensors[0]
    for i, t in enumerate(tensors[1:], 1):
        same = t.ndim == ref.ndim and all(dims_equal(a, b) for a, b in zip(t.shape, ref.shape))
        if not same:
            raise ShapeRuntimeError(
                f"stack: expects each tensor to be equal size, but got "
                f"{format_shape(ref.shape)} at entry 0 and {format_shape(t.shape)} at entry {i}",
                op="stack", operands=[(f"tensor {j}", describe(u)) for j, u in
                                      enumerate(tensors)])
    d = normalize_dim(dim, ref.ndim + 1, "stack")
    return apply(Cat(d), *[unsqueeze(t, d) for t in tensors])

