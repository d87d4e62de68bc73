"""Shapes: a tuple of sizes (ints, or symbolic dims on the meta device) and broadcasting."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ShapeflowError, ShapeIndexError, ShapeRuntimeError


class Shape(tuple):
    """A tensor's shape: a tuple (so `t.shape == (2, 3)` holds) with `numel()`."""

    __slots__ = ()

    def numel(self):
        n = 1
        for s in self:
            n = n * s
        return n

    def __repr__(self) -> str:
        return f"Shape({format_shape(self)})"

    def __str__(self) -> str:
        return format_shape(self)

    def __getitem__(self, item):
        out = tuple.__getitem__(self, item)
        return Shape(out) if type(item) is slice else out


# Concrete shapes seen, one Shape object each: making a tuple subclass costs ~1,000
# instructions in CPython 3.11, a dict lookup a quarter of that, and ops make one per call.
_known: dict[tuple, Shape] = {}
_KNOWN_MAX = 4096  # forgotten all at once past this (a model uses a few hundred)


def known_shape(sizes: Iterable) -> Shape:
    """A Shape of these sizes; the same object every time for all-int sizes."""
    shape = Shape(sizes)
    if all(type(s) is int for s in shape):
        if len(_known) >= _KNOWN_MAX:
            _known.clear()
        shape = _known.setdefault(shape, shape)
    return shape


def format_shape(shape: Iterable) -> str:
    """`[B, L, 512]`: sizes as people write them."""
    return "[" + ", ".join(str(s) for s in shape) + "]"


def shapes_equal(a: tuple, b: tuple) -> bool:
    """Exact equality of two shapes; False (not an error) when symbols cannot be told apart."""
    if a is b:
        return True
    try:
        return a == b if type(a) is type(b) else tuple(a) == tuple(b)
    except ShapeflowError:
        return False


def is_concrete(shape: tuple) -> bool:
    return all(type(s) is int for s in shape)


def dims_equal(a, b) -> bool | None:
    """Three-valued equality of two sizes: True, False, or None (cannot tell)."""
    if a is b:
        return True
    if type(a) is int and type(b) is int:
        return a == b
    from .symbolic import dim_eq

    return dim_eq(a, b)


def broadcast_shapes(a: tuple, b: tuple, op: str = "broadcast", names=("a", "b")) -> tuple:
    """NumPy/PyTorch broadcasting of two shapes; ShapeError naming both if they do not fit."""
    try:
        if a == b:
            return a
    except ShapeflowError:
        pass  # symbolic sizes that tuple equality cannot decide: take the slow path
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if type(x) is int and x == 1:
            out.append(y)
            continue
        if type(y) is int and y == 1:
            out.append(x)
            continue
        same = dims_equal(x, y)
        if same:
            out.append(x)
            continue
        if same is None:
            raise ShapeRuntimeError(
                f"{op}: cannot tell whether {x} == {y} (dim {i - n} of the broadcast)",
                op=op,
                operands=[(names[0], format_shape(a)), (names[1], format_shape(b))],
                hint="bind the symbols to sizes or use the same name for both",
            )
        raise ShapeRuntimeError(
            f"{op}: shapes {format_shape(a)} and {format_shape(b)} do not broadcast "
            f"(dim {i - n}: {x} vs {y})",
            op=op,
            operands=[(names[0], format_shape(a)), (names[1], format_shape(b))],
            hint="sizes must be equal or 1 in each dim, counting from the right",
        )
    return tuple(out)


def normalize_dim(dim: int, ndim: int, op: str = "op") -> int:
    """A dim index in [0, ndim), accepting negative dims as PyTorch does."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise ShapeRuntimeError(f"{op}: dim must be an int, got {dim!r}", op=op)
    n = max(ndim, 1)
    if dim < -n or dim >= n:
        raise ShapeIndexError(
            f"{op}: dim {dim} is out of range for a tensor of {ndim} dims "
            f"(expected in [{-n}, {n - 1}])",
            op=op,
        )
    return dim + n if dim < 0 else dim


def normalize_dims(dim, ndim: int, op: str = "op") -> tuple[int, ...]:
    """A sorted tuple of dims from None (all), an int or a sequence."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
        return (normalize_dim(dim, ndim, op),)
    dims = tuple(sorted({normalize_dim(d, ndim, op) for d in dim}))
    if len(dims) != len(tuple(dim)):
        raise ShapeRuntimeError(f"{op}: dim {tuple(dim)} repeats a dim", op=op)
    return dims


def prod_dims(sizes) -> int:
    """The product of sizes (ints or symbolic dims); 1 for none."""
    n = 1
    for s in sizes:
        n = n * s
    return n
