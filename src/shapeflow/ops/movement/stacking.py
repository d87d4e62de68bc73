"""NumPy-style stacking and splitting: hstack, vstack, dstack, column_stack, atleast_Nd,
tensor_split, hsplit/vsplit/dsplit, split_with_sizes; and ravel, reshape_as, flipud, fliplr.

All are cat, narrow, reshape and flip underneath, so gradients and meta shapes come free.
"""

from __future__ import annotations

from ...errors import ShapeError
from ...tensor import Tensor, describe
from ..registry import public
from .copies import flip
from .joins import cat
from .slicing import narrow
from .views import reshape


def _atleast(tensors, n: int, op: str):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(tuple(tensors[0]), n, op))
    out = []
    for t in tensors:
        if not isinstance(t, Tensor):
            raise ShapeError(f"{op}: expected tensors, got {type(t).__name__}", op=op)
        if t.ndim < n:  # PyTorch's placement: [n] -> [1, n] or [1, n, 1]; [a, b] -> [a, b, 1]
            shape = tuple(t.shape)
            t = reshape(t, (1,) * n if not shape else (1,) + shape + (1,) * (n - 2)
                        if len(shape) == 1 else shape + (1,))
        out.append(t)
    return out[0] if len(out) == 1 else tuple(out)


@public()
def atleast_1d(*tensors):
    """Each tensor with at least 1 dim (a 0-d one becomes [1]); a tuple for several."""
    return _atleast(tensors, 1, "atleast_1d")


@public()
def atleast_2d(*tensors):
    """Each tensor with at least 2 dims ([n] becomes [1, n]); a tuple for several."""
    return _atleast(tensors, 2, "atleast_2d")


@public()
def atleast_3d(*tensors):
    """Each tensor with at least 3 dims ([n] -> [1, n, 1], [a, b] -> [a, b, 1])."""
    return _atleast(tensors, 3, "atleast_3d")


def _many(tensors, op: str) -> list:
    tensors = list(tensors)
    if not tensors:
        raise ShapeError(f"{op}: expected a non-empty sequence of tensors", op=op)
    return tensors


@public()
def hstack(tensors) -> Tensor:
    """Tensors joined column-wise (along dim 0 for 1-d tensors, else dim 1)."""
    ts = [atleast_1d(t) for t in _many(tensors, "hstack")]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


@public()
def vstack(tensors) -> Tensor:
    """Tensors joined row-wise, after atleast_2d (an alias: row_stack)."""
    return cat([atleast_2d(t) for t in _many(tensors, "vstack")], 0)


@public()
def dstack(tensors) -> Tensor:
    """Tensors joined depth-wise (dim 2), after atleast_3d."""
    return cat([atleast_3d(t) for t in _many(tensors, "dstack")], 2)


@public()
def column_stack(tensors) -> Tensor:
    """Tensors as columns: 0-d and 1-d ones become [n, 1], then joined along dim 1."""
    ts = [reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t
          for t in _many(tensors, "column_stack")]
    return cat(ts, 1)


@public(method=True)
def tensor_split(x: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """x cut along dim into n near-equal parts (the first n % size one longer), or at the
    given indices (views, as narrow)."""
    from ...shape import normalize_dim

    if x.ndim == 0:
        raise ShapeError("tensor_split: expected a tensor with at least 1 dim", op="tensor_split",
                         operands=[("input", describe(x))])
    d = normalize_dim(dim, x.ndim, "tensor_split")
    size = x.shape[d]
    if isinstance(indices_or_sections, Tensor):
        v = indices_or_sections._need_data("tensor_split")
        indices_or_sections = int(v) if v.ndim == 0 else [int(i) for i in v]
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise ShapeError(f"tensor_split: number of sections must be > 0, got {n}",
                             op="tensor_split")
        q, r = divmod(size, n)
        bounds = [i * q + min(i, r) for i in range(1, n)]
    else:
        bounds = [int(i) for i in indices_or_sections]
    parts, start = [], 0
    for b in bounds + [size]:
        b = min(max(b + size if b < 0 else b, 0), size)  # clipped, as Python slices
        parts.append(narrow(x, d, min(start, b), max(b - start, 0)))
        start = max(start, b)
    return tuple(parts)


def _numpy_split(x: Tensor, sections, dim: int, least: int, op: str) -> tuple:
    if x.ndim < least:
        raise ShapeError(f"{op}: expected a tensor with at least {least} dims, got {x.ndim}",
                         op=op, operands=[("input", describe(x))])
    if isinstance(sections, int) and (sections <= 0 or x.shape[dim] % sections):
        raise ShapeError(f"{op}: size {x.shape[dim]} of dim {dim} is not divisible by "
                         f"{sections}", op=op, operands=[("input", describe(x))],
                         hint="tensor_split allows unequal parts")
    return tensor_split(x, sections, dim)


@public(method=True)
def hsplit(x: Tensor, indices_or_sections) -> tuple:
    """x split column-wise (dim 1; dim 0 for 1-d), into equal parts or at indices."""
    return _numpy_split(x, indices_or_sections, 0 if x.ndim == 1 else 1, 1, "hsplit")


@public(method=True)
def vsplit(x: Tensor, indices_or_sections) -> tuple:
    """x split row-wise (dim 0) into equal parts or at indices; x needs 2 dims."""
    return _numpy_split(x, indices_or_sections, 0, 2, "vsplit")


@public(method=True)
def dsplit(x: Tensor, indices_or_sections) -> tuple:
    """x split depth-wise (dim 2) into equal parts or at indices; x needs 3 dims."""
    return _numpy_split(x, indices_or_sections, 2, 3, "dsplit")


@public(method=True)
def split_with_sizes(x: Tensor, split_sizes, dim: int = 0) -> tuple:
    """x cut along dim into parts of the given sizes, which must add up to its size."""
    from ...shape import normalize_dim

    d = normalize_dim(dim, x.ndim, "split_with_sizes")
    sizes = [int(s) for s in split_sizes]
    if sum(sizes) != x.shape[d] or any(s < 0 for s in sizes):
        raise ShapeError(f"split_with_sizes: sizes {sizes} must be >= 0 and add up to "
                         f"{x.shape[d]} (dim {d})", op="split_with_sizes",
                         operands=[("input", describe(x))])
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


@public(method=True)
def ravel(x: Tensor) -> Tensor:
    """x flattened to 1 dim."""
    return reshape(x, (-1,))


@public(sf=False, method=True)
def reshape_as(x: Tensor, other: Tensor) -> Tensor:
    """x reshaped to other's shape."""
    return reshape(x, tuple(other.shape))


@public(method=True)
def flipud(x: Tensor) -> Tensor:
    """x upside down (dim 0 reversed)."""
    if x.ndim < 1:
        raise ShapeError("flipud: expected a tensor with at least 1 dim", op="flipud",
                         operands=[("input", describe(x))])
    return flip(x, (0,))


@public(method=True)
def fliplr(x: Tensor) -> Tensor:
    """x left to right (dim 1 reversed); x needs 2 dims."""
    if x.ndim < 2:
        raise ShapeError("fliplr: expected a tensor with at least 2 dims", op="fliplr",
                         operands=[("input", describe(x))])
    return flip(x, (1,))
