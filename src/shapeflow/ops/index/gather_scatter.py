"""gather / scatter / scatter_add: values taken from or written to index positions along a dim."""

from __future__ import annotations

from ...errors import DTypeError, ShapeRuntimeError
from ...shape import normalize_dim
from ...tensor import Tensor, describe
from ..base import X1, Op, apply
from ..movement.index_arrays import INTP, add_at
from ..movement.padding import pad
from ..registry import public
from .dim_index import _check_bounds, _check_index_dtype


def _le(a, b) -> bool:
    """a <= b where both are ints; equal dims are fine; unknown symbolic pairs pass."""
    if type(a) is int and type(b) is int:
        return a <= b
    from ...symbolic import dim_le

    return dim_le(a, b) is not False


def _scatter_coords(xp, index, dim: int) -> tuple:
    """The full coordinates index names along dim (a sparse grid in the other dims)."""
    coords = list(xp.indices(index.shape, sparse=True))
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
            raise ShapeRuntimeError(
                f"gather: index must have as many dims as the input: {index.ndim} vs {x.ndim}",
                op="gather", operands=[("input", describe(x)), ("index", describe(index))])
        self.d = normalize_dim(self.dim, x.ndim, "gather")
        for j, (i, s) in enumerate(zip(index.shape, x.shape)):
            if j != self.d and not _le(i, s):
                raise ShapeRuntimeError(
                    f"gather: index size {i} exceeds the input's size {s} in dim {j} "
                    f"(only dim {self.d} may be larger)", op="gather",
                    operands=[("input", describe(x)), ("index", describe(index))])
        self.in_shape = x.shape
        return index.shape, x.dtype

    def saved(self, x, index, out):
        return (X1,)

    def forward(self, x, index):
        if x.ndim == 0:  # the output has the index's shape ([k] or []), as in PyTorch
            _check_bounds(index, 1, 0, "gather")
            return x.reshape(1)[index.reshape(-1)].reshape(index.shape)
        _check_bounds(index, x.shape[self.d], self.d, "gather")
        lim = tuple(slice(None) if j == self.d else slice(0, s) for j, s in
                    enumerate(index.shape))
        return self.device.xp.take_along_axis(x[lim], index.astype(INTP, copy=False),
                                              axis=self.d)

    def backward(self, g):
        from ...factories import zeros

        (index,) = self.saved_tensors
        base = zeros(tuple(self.in_shape), dtype=g.dtype, device=g.device)
        return scatter_add(base, self.d, index, g), None


@public(method=True)
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
                raise ShapeRuntimeError(f"{self.name}: src must have as many dims as the input",
                                        op=self.name, operands=operands)
        if max(index.ndim, 1) != nd:
            raise ShapeRuntimeError(f"{self.name}: index must have as many dims as the input",
                                    op=self.name, operands=operands)
        self.d = normalize_dim(self.dim, x.ndim, self.name)
        for j, i in enumerate(index.shape):
            if (j != self.d and not _le(i, x.shape[j])) or (
                    src is not None and not _le(i, src.shape[j])):
                raise ShapeRuntimeError(
                    f"{self.name}: index size {i} in dim {j} exceeds the input's "
                                 "or src's size", op=self.name, operands=operands)
        self.index_shape = index.shape
        self.src_shape = None if src is None else src.shape
        return x.shape, x.dtype

    def saved(self, x, index, src=None, *, out):
        return (X1,)

    def forward(self, x, index, src=None):
        xp = self.device.xp
        out = xp.array(x, copy=True)
        if x.ndim == 0:
            out, index = out.reshape(1), index.reshape(-1)  # the index may hold k entries
            if src is not None:
                src = src.reshape(-1)
        _check_bounds(index, out.shape[self.d], self.d, self.name)
        coords = _scatter_coords(xp, index.astype(INTP, copy=False), self.d)
        if src is None:
            val = xp.asarray(self.value, out.dtype)
        else:
            val = src[tuple(slice(0, s) for s in index.shape)]
        if self.accumulate:
            add_at(xp, out, coords, val)
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


@public(method=True)
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
