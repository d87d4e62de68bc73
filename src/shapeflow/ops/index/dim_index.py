"""index_select / index_add: a 1-d integer index along one dim, and the index checks."""

from __future__ import annotations

from ...errors import DTypeError, ShapeIndexError, ShapeRuntimeError
from ...shape import dims_equal, format_shape, normalize_dim
from ...tensor import Tensor, describe
from ..base import X1, Op, apply
from ..movement.index_arrays import INTP, add_at
from ..registry import public


def _check_index_dtype(index: Tensor, op: str) -> None:
    if not isinstance(index, Tensor):
        raise DTypeError(f"{op}: index must be an integer tensor, got {type(index).__name__}",
                         op=op)
    if not index.dtype.is_integer:
        raise DTypeError(f"{op}: index must be an integer tensor, got {index.dtype}", op=op,
                         operands=[("index", describe(index))], hint="convert with .long()")


def _check_bounds(index, n: int, d: int, op: str) -> None:
    """Index values (a device array) must lie in [0, n) (gather/scatter/index_select do not
    wrap negatives)."""
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = int(index.min() if index.min() < 0 else index.max())
        raise ShapeIndexError(f"{op}: index {bad} is out of bounds for dim {d} with size {n}",
                                op=op)


def _check_scalar_index(index: Tensor, op: str) -> None:
    """Into a 0-d tensor the index holds exactly one entry (PyTorch: RuntimeError)."""
    n = index.shape.numel()
    if type(n) is int and n != 1:
        raise ShapeRuntimeError(f"{op}: an index into a 0-d tensor must hold one entry, got "
                                f"{n}", op=op, operands=[("index", describe(index))])


class IndexSelect(Op):
    name = "index_select"

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def infer(self, x, index):
        _check_index_dtype(index, "index_select")
        if index.ndim > 1:
            raise ShapeRuntimeError(f"index_select: index must be 1-d, got {describe(index)}",
                                    op="index_select", operands=[("index", describe(index))])
        self.d = normalize_dim(self.dim, x.ndim, "index_select")
        self.in_shape = x.shape
        if x.ndim == 0:
            _check_scalar_index(index, "index_select")
            return (), x.dtype
        shape = list(x.shape)
        shape[self.d] = index.shape[0] if index.ndim else 1
        return tuple(shape), x.dtype

    def saved(self, x, index, out):
        return (X1,)

    def forward(self, x, index):
        index = index.reshape(-1).astype(INTP, copy=False)
        if x.ndim == 0:
            _check_bounds(index, 1, 0, "index_select")
            return x.copy()
        _check_bounds(index, x.shape[self.d], self.d, "index_select")
        return self.device.xp.take(x, index, axis=self.d)

    def backward(self, g):
        from ...factories import zeros

        (index,) = self.saved_tensors
        base = zeros(tuple(self.in_shape), dtype=g.dtype, device=g.device)
        return index_add(base, self.d, index, g), None


@public(method=True)
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
            raise ShapeRuntimeError(
                "index_add: index must be 1-d", op="index_add", operands=operands)
        self.d = d = normalize_dim(self.dim, x.ndim, "index_add")
        want = list(x.shape)
        if x.ndim == 0:
            _check_scalar_index(index, "index_add")
        else:
            want[d] = index.shape[0] if index.ndim else 1
        if source.ndim != x.ndim or not all(
                dims_equal(a, b) for a, b in zip(source.shape, want)):
            raise ShapeRuntimeError(f"index_add: source must have shape {format_shape(want)}",
                                    op="index_add", operands=operands)
        return x.shape, x.dtype

    def saved(self, x, index, source, out):
        return (X1,)

    def forward(self, x, index, source):
        xp = self.device.xp
        index = index.reshape(-1).astype(INTP, copy=False)
        out = xp.array(x, copy=True)
        src = source if self.alpha == 1 else source * self.alpha
        if x.ndim == 0:  # one element: add through a [1] view of it
            _check_bounds(index, 1, 0, "index_add")
            add_at(xp, out.reshape(1), index, src.reshape(1).astype(out.dtype, copy=False))
            return out
        _check_bounds(index, x.shape[self.d], self.d, "index_add")
        add_at(xp, out, (slice(None),) * self.d + (index,), src.astype(out.dtype, copy=False))
        return out

    def backward(self, g):
        (index,) = self.saved_tensors
        gs = index_select(g, self.d, index)
        return g, None, gs if self.alpha == 1 else gs * self.alpha


@public(method=True)
def index_add(x: Tensor, dim: int, index: Tensor, source: Tensor, alpha=1) -> Tensor:
    return apply(IndexAdd(dim, alpha), x, index, source)
