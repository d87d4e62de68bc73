"""Reductions over dims: sum, mean, prod, max/min, var/std, logsumexp, cumsum, all/any, norm.

`dim` is an int, a tuple or None (all dims), negative ok; as in PyTorch an empty tuple
also means all dims for sum, mean, prod, amax/amin, var/std, logsumexp and norm.
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple

import numpy as np

from .. import dtypes as _dt
from ..errors import DTypeError, ShapeError
from ..shape import format_shape, is_concrete, normalize_dims, prod_dims
from ..tensor import Tensor, describe
from .base import OUT, X0, Op, Saved, apply
from .blas_sum import sum_over

_int64 = _dt.int64

# torch.return_types.max / .min: a tuple with .values and .indices
MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


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
        raise ShapeError(f"{e.message} (input shape {format_shape(x.shape)})", op=op,
                         operands=[("input", describe(x))]) from None
    return dims if n else ()  # a 0-d tensor accepts dim 0 / -1 and has nothing to reduce


def _one_dim(dim, x: Tensor, op: str) -> int:
    """A single dim for ops that take one (max(dim), argmax, cumsum)."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise ShapeError(f"{op}: dim must be an int, got {dim!r}", op=op,
                         operands=[("input", describe(x))],
                         hint="use amax/amin to reduce several dims" if op in ("max", "min")
                         else None)
    dims = reduce_dims(dim, x, op)
    return dims[0] if dims else 0


def _check_nonempty(op: str, x: Tensor, dims, dim_given: bool) -> None:
    """max/min/argmax of no elements has no value: PyTorch's error, as a ShapeError."""
    if not dim_given:
        n = x.shape.numel()
        if type(n) is int and n == 0:
            raise ShapeError(
                f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
                f"Specify the reduction dim with the 'dim' argument.", op=op,
                operands=[("input", describe(x))])
        return
    for d in dims:
        s = x.shape[d]
        if type(s) is int and s == 0:
            raise ShapeError(f"{op}(): Expected reduction dim {d} to have non-zero size.",
                             op=op, operands=[("input", describe(x))],
                             hint="an empty dim has no max or min; check the slicing that "
                             "produced it")


def _need_float(op: str, x: Tensor) -> None:
    if x.dtype.category != 2:
        raise DTypeError(
            f"{op}(): expected a floating point tensor, got {x.dtype}", op=op,
            operands=[("input", describe(x))],
            hint=f"convert first with .float(), or pass dtype= where {op} takes one")


def _compute_np(dt: _dt.DType):
    """The NumPy dtype a float kernel computes in: float32 for the 16-bit floats."""
    return np.float32 if dt.itemsize == 2 else dt.np


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
        return dt

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
    from .movement import Expand, _view_apply

    if is_concrete(shape) and is_concrete(t.shape) and tuple(t.shape) == tuple(shape):
        return t
    return _view_apply(Expand(shape), t)


class Sum(Reduction):
    name = "sum"

    def out_dtype(self, dt):
        return _int64 if dt.category < 2 else dt  # PyTorch sums ints and bools as int64

    def forward(self, x):
        dt = self.out_dtype(_dt.from_numpy_dtype(x.dtype)).np
        if x.dtype == dt:
            out = sum_over(x, self.dims, self.keepdim)
            if out is not None:
                return out
        return np.sum(x, axis=self.dims, keepdims=self.keepdim, dtype=dt)

    def backward(self, g):
        return (self.expand_grad(g),)


class Mean(Reduction):
    name = "mean"

    def out_dtype(self, dt):
        if dt.category != 2:
            raise DTypeError(
                f"mean(): could not infer output dtype. Input dtype must be a floating point "
                f"dtype, got {dt}", op="mean",
                hint="pass dtype=sf.float32, or convert with .float() first")
        return dt

    def forward(self, x):
        dt = x.dtype
        acc = _compute_np(_dt.from_numpy_dtype(dt))
        if x.size == 0:  # the mean of nothing is nan, as in PyTorch (without NumPy's warning)
            with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                out = np.mean(x, axis=self.dims, keepdims=self.keepdim, dtype=acc)
        else:
            out = sum_over(x, self.dims, self.keepdim) if dt == acc else None
            if out is not None:
                out /= math.prod(x.shape[d] for d in self.dims)
            else:
                out = np.mean(x, axis=self.dims, keepdims=self.keepdim, dtype=acc)
        return np.asarray(out).astype(dt, copy=False)

    def backward(self, g):
        n = prod_dims(self.in_shape[d] for d in self.dims)
        if type(n) is not int:  # symbolic sizes exist only on meta, where values do not matter
            return (self.expand_grad(g),)
        return (self.expand_grad(g / n),)


class Prod(Reduction):
    name = "prod"

    def out_dtype(self, dt):
        return _int64 if dt.category < 2 else dt

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        dt = self.out_dtype(_dt.from_numpy_dtype(x.dtype)).np
        return np.prod(x, axis=self.dims, keepdims=self.keepdim, dtype=dt)

    def backward(self, g):
        # d prod / d x_i = prod of the others: out / x_i where x_i != 0; where x has exactly
        # one zero in the slice, the zero gets the product of the rest; with two or more, 0.
        from .elementwise import where

        x, out = self.saved_tensors
        dims = self.dims
        is_zero = x == 0
        safe_x = where(is_zero, 1.0, x)
        one_zero = is_zero.sum(dim=dims, keepdim=True) == 1
        at_zero = where(one_zero, prod(safe_x, dims, keepdim=True), 0.0)
        others = where(is_zero, at_zero, self.keep(out) / safe_x)
        return (self.keep(g) * others,)


class AMax(Reduction):
    """amax / amin, and max() / min() of all elements: ties share the gradient evenly."""

    def __init__(self, dim, keepdim: bool = False, name: str = "amax") -> None:
        super().__init__(dim, keepdim)
        self.name = name
        self.fn = np.max if name in ("amax", "max") else np.min

    def infer(self, x):
        shape, dt = Reduction.infer(self, x)
        d = self.dim
        given = not (d is None or (isinstance(d, (tuple, list)) and not d))
        _check_nonempty(self.name, x, self.dims, given)
        return shape, dt

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        return self.fn(x, axis=self.dims, keepdims=self.keepdim)

    def backward(self, g):
        x, out = self.saved_tensors
        mask = x == self.keep(out)
        count = mask.sum(dim=self.dims, keepdim=True)
        return ((self.keep(g) / count) * mask,)


class MaxDim(Op):
    """max(dim) / min(dim): the values; the gradient goes to the index returned."""

    def __init__(self, dim: int, keepdim: bool, name: str) -> None:
        self.dim, self.keepdim, self.name = dim, keepdim, name

    def infer(self, x):
        d = _one_dim(self.dim, x, self.name)
        self.d = d
        dims = (d,) if x.ndim else ()
        _check_nonempty(self.name, x, dims, True)
        self.in_shape = x.shape
        self.keep_shape = reduced_shape(x.shape, dims, True)
        return reduced_shape(x.shape, dims, self.keepdim), x.dtype

    def saved(self, x, out):
        return (Saved.new("indices", self.keep_shape, _int64),)

    def forward(self, x):
        if x.ndim == 0:
            idx = np.zeros((), dtype=np.int64)
            values = x.copy()
        else:
            arg = np.argmax if self.name == "max" else np.argmin
            idx = arg(x, axis=self.d, keepdims=True)
            values = np.take_along_axis(x, idx, axis=self.d)
            if not self.keepdim:
                values = values.squeeze(self.d)
        self.indices = idx  # for backward (the engine takes it if the node is recorded)
        # the user's indices are a copy, so changing them in place cannot corrupt backward
        self.indices_out = idx.reshape(values.shape).copy()
        return values

    def backward(self, g):
        (idx,) = self.saved_tensors
        mask = apply(OneHot(self.d, self.in_shape), idx)
        g = g.reshape(self.keep_shape) if not self.keepdim else g
        return (g * mask,)


class OneHot(Op):
    """A bool mask of `shape`, true where the position along `dim` equals the index."""

    name = "one_hot"
    differentiable = False

    def __init__(self, dim: int, shape) -> None:
        self.dim, self.shape = dim, tuple(shape)

    def infer(self, idx):
        return self.shape, _dt.bool_

    def forward(self, idx):
        if not self.shape:
            return np.ones((), dtype=np.bool_)
        view = [1] * len(self.shape)
        view[self.dim] = self.shape[self.dim]
        return np.arange(self.shape[self.dim]).reshape(view) == idx


class ArgMax(Op):
    name = "argmax"
    differentiable = False

    def __init__(self, dim, keepdim: bool, name: str = "argmax") -> None:
        self.dim, self.keepdim, self.name = dim, keepdim, name

    def infer(self, x):
        if x.dtype is _dt.bool_:
            raise DTypeError(f"{self.name}(): does not support bool input", op=self.name,
                             operands=[("input", describe(x))], hint="convert with .int()")
        if self.dim is None:
            _check_nonempty(self.name, x, (), False)
            return ((1,) * x.ndim if self.keepdim else ()), _int64
        self.d = _one_dim(self.dim, x, self.name)
        dims = (self.d,) if x.ndim else ()
        _check_nonempty(self.name, x, dims, True)
        return reduced_shape(x.shape, dims, self.keepdim), _int64

    def forward(self, x):
        fn = np.argmax if self.name == "argmax" else np.argmin
        if self.dim is None:
            out = np.asarray(fn(x), dtype=np.int64)
            return out.reshape((1,) * x.ndim) if self.keepdim else out
        if x.ndim == 0:
            return np.zeros((), dtype=np.int64)
        return fn(x, axis=self.d, keepdims=self.keepdim).astype(np.int64, copy=False)


class Var(Reduction):
    name = "var"

    def __init__(self, dim, correction, keepdim: bool) -> None:
        super().__init__(dim, keepdim)
        self.correction = correction

    def out_dtype(self, dt):
        if dt.category != 2:
            raise DTypeError(f"std and var only support floating point dtypes, got {dt}",
                             op=self.name, hint="convert with .float() first")
        return dt

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        dt = x.dtype
        n = prod_dims(x.shape[d] for d in self.dims)
        xc = x.astype(_compute_np(_dt.from_numpy_dtype(dt)), copy=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            if n - self.correction > 0:
                out = np.var(xc, axis=self.dims, ddof=self.correction, keepdims=self.keepdim)
            else:  # PyTorch: divide by max(0, N - correction), giving inf or nan
                mean_ = np.mean(xc, axis=self.dims, keepdims=True) if n else 0.0
                ss = np.sum((xc - mean_) ** 2, axis=self.dims, keepdims=self.keepdim)
                out = ss / 0.0
        return np.asarray(out).astype(dt, copy=False)

    def backward(self, g):
        (x,) = self.saved_tensors
        centered = x - x.mean(dim=self.dims, keepdim=True)
        with np.errstate(invalid="ignore"):  # N <= correction: inf * 0 is nan, as in PyTorch
            return (self.keep(g) * centered * self.grad_scale(),)

    def grad_scale(self) -> float:
        """d var / d x = (x - mean) * 2 / (N - correction), as PyTorch's var_backward."""
        denom = prod_dims(self.in_shape[d] for d in self.dims) - self.correction
        if type(denom) is not int and not isinstance(denom, float):
            return 1.0  # symbolic sizes (meta only): the value does not matter
        return 2.0 / denom if denom != 0 else math.inf


class Std(Var):
    """sqrt(var); the gradient is 0 where the std is 0 (as in PyTorch), not nan."""

    name = "std"

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        out = Var.forward(self, x.astype(_compute_np(_dt.from_numpy_dtype(x.dtype)),
                                         copy=False))
        with np.errstate(invalid="ignore"):
            return np.sqrt(out).astype(x.dtype, copy=False)

    def backward(self, g):
        from .elementwise import where

        x, out = self.saved_tensors
        out = self.keep(out)
        zero = out == 0
        gv = where(zero, 0.0, self.keep(g) / (where(zero, 1.0, out) * 2.0))
        with np.errstate(invalid="ignore"):
            return (gv * (x - x.mean(dim=self.dims, keepdim=True)) * self.grad_scale(),)


class LogSumExp(Reduction):
    name = "logsumexp"

    def out_dtype(self, dt):
        return dt if dt.category == 2 else _dt.default_float

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        dt = self.out_dtype(_dt.from_numpy_dtype(x.dtype))
        xc = x.astype(_compute_np(dt), copy=False)
        m = np.max(xc, axis=self.dims, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0).astype(xc.dtype, copy=False)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            s = np.sum(np.exp(xc - m), axis=self.dims, keepdims=True)
            out = np.log(s) + m
        if not self.keepdim:
            out = out.reshape(reduced_shape(x.shape, self.dims, False))
        return out.astype(dt.np, copy=False)

    def backward(self, g):
        from .elementwise import exp

        x, out = self.saved_tensors
        return (self.keep(g) * exp(x - self.keep(out)),)


class Cumsum(Op):
    """Running sum along one dim; its gradient is the reversed running sum."""

    name = "cumsum"

    def __init__(self, dim: int, reverse: bool = False) -> None:
        self.dim, self.reverse = dim, reverse

    def infer(self, x):
        self.d = _one_dim(self.dim, x, self.name)
        return x.shape, (_int64 if x.dtype.category < 2 else x.dtype)

    def forward(self, x):
        dt = np.int64 if x.dtype.kind in "biu" else x.dtype
        if x.ndim == 0:
            return x.astype(dt)
        if self.reverse:
            return np.flip(np.cumsum(np.flip(x, self.d), axis=self.d, dtype=dt), self.d).copy()
        return np.cumsum(x, axis=self.d, dtype=dt)

    def backward(self, g):
        return (apply(Cumsum(self.d, not self.reverse), g),)


class AllAny(Reduction):
    differentiable = False
    empty_is_all = False  # PyTorch: all(x, dim=()) reduces nothing

    def __init__(self, dim, keepdim: bool, name: str) -> None:
        super().__init__(dim, keepdim)
        self.name = name

    def out_dtype(self, dt):
        return dt if dt is _dt.uint8 else _dt.bool_

    def forward(self, x):
        fn = np.all if self.name == "all" else np.any
        out = fn(x, axis=self.dims, keepdims=self.keepdim)
        return np.asarray(out).astype(x.dtype if x.dtype == np.uint8 else np.bool_, copy=False)


class VectorNorm(Reduction):
    """(sum |x|^p)^(1/p) for finite p > 0; the gradient is 0 where the norm is 0."""

    name = "norm"

    def __init__(self, p, dim, keepdim: bool) -> None:
        super().__init__(dim, keepdim)
        self.p = p

    def out_dtype(self, dt):
        if dt.category != 2:
            raise DTypeError(f"norm(): expected a floating point tensor as input, got {dt}",
                             op="norm", hint="convert with .float() first")
        return dt

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        dt = x.dtype
        xc = x.astype(_compute_np(_dt.from_numpy_dtype(dt)), copy=False)
        if self.p == 2:
            out = np.sqrt(np.sum(xc * xc, axis=self.dims, keepdims=self.keepdim))
        else:
            out = np.sum(np.abs(xc) ** self.p, axis=self.dims, keepdims=self.keepdim) ** (
                1.0 / self.p)
        return np.asarray(out).astype(dt, copy=False)

    def backward(self, g):
        from .elementwise import abs as abs_
        from .elementwise import where

        x, out = self.saved_tensors
        out = self.keep(out)
        zero = out == 0
        safe = where(zero, 1.0, out)
        p = self.p
        if p == 2:
            scale = where(zero, 0.0, 1.0 / safe)
            return (self.keep(g) * scale * x,)
        scale = where(zero, 0.0, safe ** (1.0 - p))
        ax = abs_(x)
        if p < 2:  # |x|^(p-2) is infinite at x = 0, where the gradient is 0
            xz = x == 0
            xs = where(xz, 0.0, x * (where(xz, 1.0, ax) ** (p - 2.0)))
        else:
            xs = x * ax ** (p - 2.0)
        return (self.keep(g) * scale * xs,)


# ---- functional API ---------------------------------------------------------------------
def sum(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A001
    out = apply(Sum(dim, keepdim), x)
    return out if dtype is None else out.to(dtype)


def mean(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    return apply(Mean(dim, keepdim), x)


def prod(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    return apply(Prod(dim, keepdim), x)


def amax(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    return apply(AMax(dim, keepdim, "amax"), x)


def amin(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    return apply(AMax(dim, keepdim, "amin"), x)


def _max_min(name: str, x: Tensor, dim, keepdim: bool):
    if isinstance(dim, Tensor):
        from .elementwise import maximum, minimum

        return (maximum if name == "max" else minimum)(x, dim)
    if dim is None:
        return apply(AMax(None, False, name), x)
    op = MaxDim(dim, keepdim, name)
    values = apply(op, x)
    data = op.__dict__.pop("indices_out", None)  # None on meta
    indices = Tensor._make(data, values.shape, _int64, x.device)
    if x.requires_grad:
        indices._origin = "int"
    return (MaxResult if name == "max" else MinResult)(values, indices)


def max(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    """max(x): the largest element; max(x, dim): (values, indices); max(x, y): maximum."""
    return _max_min("max", x, dim, keepdim)


def min(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    """min(x): the smallest element; min(x, dim): (values, indices); min(x, y): minimum."""
    return _max_min("min", x, dim, keepdim)


def argmax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the largest value (the first one on ties); dim None: into the flattened x."""
    return apply(ArgMax(dim, keepdim, "argmax"), x)


def argmin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return apply(ArgMax(dim, keepdim, "argmin"), x)


def _correction(name: str, dim, unbiased, correction):
    if isinstance(dim, bool):  # var(x, True): the legacy `unbiased` positional
        dim, unbiased = None, dim if unbiased is None else unbiased
    if unbiased is not None and correction is not None:
        raise ValueError(f"{name}: give either unbiased= or correction=, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


def var(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    """Variance with Bessel's correction by default (divide by N - correction)."""
    dim, correction = _correction("var", dim, unbiased, correction)
    return apply(Var(dim, correction, keepdim), x)


def std(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    dim, correction = _correction("std", dim, unbiased, correction)
    return apply(Std(dim, correction, keepdim), x)


def logsumexp(x: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over dim, computed without overflow."""
    return apply(LogSumExp(dim, keepdim), x)


def cumsum(x: Tensor, dim: int, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    return apply(Cumsum(dim), x)


def all(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return apply(AllAny(dim, keepdim, "all"), x)


def any(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return apply(AllAny(dim, keepdim, "any"), x)


def norm(x: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The p-norm over dim (all elements when None); 'fro' is the 2-norm of the elements."""
    from .elementwise import abs as abs_

    if dtype is not None:
        x = x.to(dtype)
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm: p={p!r} is not supported (use a number or 'fro')")
    if x.dtype.category != 2:
        _need_float("norm", x)
    if dim == ():
        dim = None
    if p == math.inf:
        return amax(abs_(x), dim if dim is not None else (), keepdim)
    if p == -math.inf:
        return amin(abs_(x), dim if dim is not None else (), keepdim)
    if p == 1:
        return sum(abs_(x), dim, keepdim)
    if p == 0:
        return sum(x != 0, dim, keepdim).to(x.dtype)
    if p < 0:
        raise ValueError(f"norm: negative p={p} is not supported")
    return apply(VectorNorm(p, dim, keepdim), x)


METHODS = ("sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "var",
           "std", "logsumexp", "cumsum", "all", "any", "norm")
__all__ = list(METHODS)
