"""View ops: reshape, expand, permute and their composites (the output may share memory)."""

from __future__ import annotations

from ...errors import ShapeError, ShapeIndexError, ShapeRuntimeError
from ...shape import (
    dims_equal,
    format_shape,
    is_concrete,
    normalize_dim,
    normalize_dims,
    prod_dims,
    shapes_equal,
)
from ...tensor import Tensor, describe
from .. import meta_layout
from ..base import Op, apply
from ..registry import public


class View(Op):
    """An op whose output may share the input's memory (so it shares its version counter)."""

    is_view = True

    def meta_layout(self, arr):
        """The op on a meta layout array, a host NumPy array (a view, or None where NumPy
        would copy); views that need a namespace override it with the host's."""
        return self.forward(arr)


def _view_apply(op: View, x: Tensor) -> Tensor:
    out = apply(op, x)
    if out._data is None:
        if not meta_layout.view(op, x, out):
            return out  # NumPy would copy here: the meta tensor gets memory of its own
        out._version = x._version
        out._base = x if x._base is None else x._base
    elif x.device.xp.may_share_memory(out._data, x._data):
        out._version = x._version  # in-place changes through either are seen by both
        out._base = x if x._base is None else x._base
    return out


def infer_reshape(shape, target, op: str = "reshape") -> tuple:
    """The target shape with one -1 solved; ShapeError if the sizes cannot match."""
    target = tuple(target)
    n = prod_dims(shape)
    if target.count(-1) > 1:
        raise ShapeRuntimeError(f"{op}: only one dim can be -1, got {format_shape(target)}", op=op)
    if -1 in target:
        known = prod_dims(s for s in target if not (type(s) is int and s == -1))
        if is_concrete(shape) and is_concrete(target):
            if known == 0 or n % known:
                raise _reshape_error(op, shape, target)
            missing = n // known
        else:
            from ...symbolic import exact_div

            missing = exact_div(n, known)
        target = tuple(missing if (type(s) is int and s == -1) else s for s in target)
    for s in target:
        if type(s) is int and s < 0:
            raise ShapeRuntimeError(f"{op}: invalid size {s} in {format_shape(target)}", op=op)
    same = dims_equal(prod_dims(target), n)
    if same is None:
        raise ShapeRuntimeError(
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
    return ShapeRuntimeError(
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


def _negative_size(x: Tensor, target: tuple, i: int, rule: str) -> ShapeError:
    return ShapeRuntimeError(
        f"expand: the expanded size {target[i]} at dim {i} of {format_shape(target)} {rule}",
        op="expand", operands=[("input", describe(x))],
        hint="give every new leading dim its size" if i < len(target) - x.ndim else None)


class Expand(View):
    name = "expand"

    def __init__(self, shape) -> None:
        self.target = tuple(shape)

    def infer(self, x):
        target, n = self.target, len(self.target)
        if n < x.ndim:
            raise ShapeRuntimeError(
                f"expand: the target {format_shape(target)} has fewer dims than the input "
                f"{format_shape(x.shape)}", op="expand", operands=[("input", describe(x))])
        lead = n - x.ndim
        out = list(target[:lead])
        for i, t in enumerate(out):
            if type(t) is int and t < 0:
                raise _negative_size(x, target, i, "isn't allowed in a leading, new dim")
        for s, t in zip(x.shape, target[lead:]):
            if type(t) is int and t == -1:
                out.append(s)
            elif type(s) is int and s == 1:
                if type(t) is int and t < 0:
                    raise _negative_size(x, target, len(out), "is invalid: only -1 (keep "
                                         "the input's size) may be negative")
                out.append(t)
            elif s is t or s == t:
                out.append(s)
            else:
                raise ShapeRuntimeError(
                    f"expand: cannot expand {format_shape(x.shape)} to {format_shape(target)} "
                    f"(size {s} is not 1 and differs from {t})",
                    op="expand", operands=[("input", describe(x))],
                    hint="only size-1 dims can be expanded; use repeat() to copy data")
        self.in_shape = x.shape
        self.out_shape = tuple(out)
        return self.out_shape, x.dtype

    def forward(self, x):
        return self.device.xp.broadcast_to(x, self.out_shape)

    def meta_layout(self, arr):
        return meta_layout.host.broadcast_to(arr, self.out_shape)

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
            bad = [d for d in dims if not 0 <= d < max(n, 1)]
            cls = ShapeIndexError if bad and len(dims) == n else ShapeRuntimeError
            raise cls(
                f"permute: dims {self.dims} are not a permutation of {n} dims",
                op="permute", operands=[("input", describe(x))])
        self.dims = dims
        return tuple(x.shape[d] for d in dims), x.dtype

    def forward(self, x):
        return x.transpose(self.dims)

    def backward(self, g):
        inverse = [0] * len(self.dims)
        for i, d in enumerate(self.dims):
            inverse[d] = i
        return (g.permute(tuple(inverse)),)


@public(method=True)
def reshape(x: Tensor, *shape) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if shapes_equal(shape, x.shape):
        return _view_apply(Reshape(shape), x) if x.requires_grad else x
    return _view_apply(Reshape(shape), x)


@public(method=True)
def view(x: Tensor, *shape) -> Tensor:
    """reshape that never copies: PyTorch's stride rule decides, as NumPy's no-copy reshape;
    view(dtype) reinterprets the bytes."""
    if len(shape) == 1 and type(shape[0]).__name__ == "DType":  # view(dtype): reinterpret
        from .dtype_view import view_dtype

        return view_dtype(x, shape[0])
    out = reshape(x, *shape)
    if out is x or out._base is not None:
        return out
    n = prod_dims(x.shape)
    if type(n) is int and n == 0:
        return out  # nothing to share: PyTorch views any empty tensor
    strides = (f" with strides {tuple(s // x._data.itemsize for s in x._data.strides)}"
               if x._data is not None else " (a strided meta view)")
    raise ShapeError(
        f"view: size {format_shape(out.shape)} is not compatible with the input's size and "
        f"stride: {format_shape(x.shape)}{strides} cannot be read as that shape without a "
        f"copy (at least one dimension spans two non-adjacent blocks)", op="view",
        operands=[("input", describe(x))],
        hint="use .reshape(...) (copies when it must) or .contiguous().view(...); writes "
             "through a copy would not reach the input")


@public(method=True)
def expand(x: Tensor, *shape) -> Tensor:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if shapes_equal(tuple(shape), x.shape):
        return x
    return _view_apply(Expand(shape), x)


@public(method=True)
def broadcast_to(x: Tensor, shape) -> Tensor:
    return expand(x, tuple(shape))


@public(method=True)
def permute(x: Tensor, *dims) -> Tensor:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return _view_apply(Permute(dims), x)


@public(method=True)
def transpose(x: Tensor, dim0: int, dim1: int) -> Tensor:
    n = x.ndim
    if n < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return x
    d0, d1 = normalize_dim(dim0, n, "transpose"), normalize_dim(dim1, n, "transpose")
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(x, dims)


@public(method=True)
def unsqueeze(x: Tensor, dim: int) -> Tensor:
    d = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    shape = tuple(x.shape)
    return _view_apply(Reshape(shape[:d] + (1,) + shape[d:]), x)


@public(method=True)
def squeeze(x: Tensor, dim=None) -> Tensor:
    shape = tuple(x.shape)
    if dim is None:
        dims = {i for i, s in enumerate(shape) if type(s) is int and s == 1}
    else:
        dims = {d for d in normalize_dims(dim, x.ndim, "squeeze")
                if x.ndim and type(shape[d]) is int and shape[d] == 1}  # 0-d: dim 0/-1 ok
    if not dims:
        return x
    return _view_apply(Reshape(tuple(s for i, s in enumerate(shape) if i not in dims)), x)


@public(method=True)
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    s = normalize_dim(start_dim, x.ndim, "flatten")
    e = normalize_dim(end_dim, x.ndim, "flatten")
    if x.ndim == 0:
        return reshape(x, (1,))
    if s > e:
        raise ShapeRuntimeError(
            f"flatten: start_dim {start_dim} cannot come after end_dim {end_dim}",
            op="flatten", operands=[("input", describe(x))])
    if s == e:
        return x
    shape = tuple(x.shape)
    return reshape(x, shape[:s] + (prod_dims(shape[s:e + 1]),) + shape[e + 1:])


@public(method=True)
def unflatten(x: Tensor, dim: int, sizes) -> Tensor:
    d = normalize_dim(dim, x.ndim, "unflatten")
    if x.ndim == 0:
        raise ShapeRuntimeError("unflatten: a 0-d tensor has no dim to unflatten",
                                op="unflatten", operands=[("input", describe(x))])
    shape = tuple(x.shape)
    sizes = infer_reshape((shape[d],), tuple(sizes), "unflatten")
    return reshape(x, shape[:d] + sizes + shape[d + 1:])


@public(method=True)
def movedim(x: Tensor, source, destination) -> Tensor:
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    n = x.ndim
    if len(src) != len(dst):
        raise ShapeRuntimeError(
            f"movedim: source {src} and destination {dst} have different lengths",
            op="movedim")
    src = [normalize_dim(d, n, "movedim") for d in src]
    dst = [normalize_dim(d, n, "movedim") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeRuntimeError(f"movedim: repeated dim in source {src} or destination {dst}",
                                op="movedim")
    if n == 0:
        return x  # a 0-d tensor: dims 0 and -1 name the tensor itself, as in PyTorch
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return permute(x, order) if order != list(range(n)) else x


moveaxis = public(sf="moveaxis", method="moveaxis")(movedim)


@public(method=True)
def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    return transpose(x, axis0, axis1)


swapdims = public(sf="swapdims", method="swapdims")(swapaxes)

