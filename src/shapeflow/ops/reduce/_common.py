"""What the reductions share: dim normalization, reduced shapes, the Reduction base."""

from __future__ import annotations

from contextlib import nullcontext

from ... import dtypes as _dt
from ...dtypes import promote
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import format_shape, is_concrete, normalize_dims
from ...tensor import Tensor, describe
from ..base import Op

_int64 = _dt.int64


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def reduce_dims(dim, x: Tensor, op: str, empty_is_all: bool = True) -> tuple[int, ...]:
    """Sorted, non-negative dims to reduce; a bad dim is a ShapeError naming x's shape."""
    n = x.ndim
    if dim is None or (empty_is_all and isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(n))
    try:
        dims = normalize_dims(dim, n, op)
    except ShapeError as e:
        raise type(e)(f"{e.message} (input shape {format_shape(x.shape)})", op=op,
                      operands=[("input", describe(x))]) from None
    return dims if n else ()  # a 0-d tensor accepts dim 0 / -1 and has nothing to reduce


def _one_dim(dim, x: Tensor, op: str) -> int:
    """A single dim for ops that take one (max(dim), argmax, cumsum)."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise ShapeRuntimeError(f"{op}: dim must be an int, got {dim!r}", op=op,
                                operands=[("input", describe(x))],
                                hint="use amax/amin to reduce several dims" if op in ("max", "min")
                                else None)
    dims = reduce_dims(dim, x, op)
    return dims[0] if dims else 0


def _compute_np(dt: _dt.DType):
    """The NumPy dtype a float kernel computes in: float32 for the 16-bit floats (callers
    run on floats only: their out_dtype refuses the others)."""
    return _dt.opmath(dt).np


def quiet(x: Tensor, **ignore):
    """x's device's floating-point error state with `ignore`'s kinds off (xp.errstate), for
    backward formulas; nothing on meta, whose namespace gives None."""
    return x.device.xp.errstate(**ignore) or nullcontext()


class Reduction(Op):
    """Reduce `dims` of the input; subclasses give fn and the output dtype."""

    empty_is_all = True

    def __init__(self, dim, keepdim: bool = False) -> None:
        self.dim, self.keepdim = dim, keepdim

    def infer(self, x):
        self.dims = reduce_dims(self.dim, x, self.name, self.empty_is_all)
        self.in_shape = x.shape
        try:
            dt = self.out_dtype(x.dtype)
        except DTypeError as e:
            e.operands = e.operands or [("input", describe(x))]
            raise
        return reduced_shape(x.shape, self.dims, self.keepdim), dt

    def out_dtype(self, dt):
        """The result dtype from the input's: moved by the op's `promotion` kind where it
        declares one (floats are kept by each kind reductions declare), else dt itself."""
        if dt.is_floating_point or self.promotion is None:
            return dt
        return promote(self.promotion, dt)

    @property
    def keep_shape(self) -> tuple:
        return reduced_shape(self.in_shape, self.dims, True)

    def keep(self, t: Tensor) -> Tensor:
        """A reduced tensor with the reduced dims kept as size 1 (so it broadcasts back)."""
        if not self.keepdim and self.dims:
            return t.reshape(self.keep_shape)
        return t

    def expand_grad(self, g: Tensor) -> Tensor:
        """The output gradient broadcast back over the reduced dims."""
        return expand_to(self.keep(g), self.in_shape)


def expand_to(t: Tensor, shape) -> Tensor:
    """t.expand(shape), also for symbolic sizes (whose tuple equality may be undecidable)."""
    from ..movement import Expand, _view_apply

    if is_concrete(shape) and is_concrete(t.shape) and tuple(t.shape) == tuple(shape):
        return t
    return _view_apply(Expand(shape), t)
