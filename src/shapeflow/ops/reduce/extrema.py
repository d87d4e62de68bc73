"""max / min (values and indices), amax / amin and argmax / argmin."""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeRuntimeError
from ...tensor import Tensor, describe
from ..base import OUT, X0, Op, Saved, apply
from ..elementwise.complex_parts import refuse_complex as _refuse_complex
from ..registry import public
from ._common import Reduction, _int64, _one_dim, reduced_shape

# torch.return_types.max / .min: a tuple with .values and .indices
MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def _check_nonempty(op: str, x: Tensor, dims, dim_given: bool) -> None:
    """max/min/argmax of no elements has no value: PyTorch's error, as a ShapeError."""
    if not dim_given:
        n = x.shape.numel()
        if type(n) is int and n == 0:
            raise ShapeRuntimeError(
                f"{op}(): Expected reduction dim to be specified for input.numel() == 0. "
                f"Specify the reduction dim with the 'dim' argument.", op=op,
                operands=[("input", describe(x))])
        return
    for d in dims:
        s = x.shape[d]
        if type(s) is int and s == 0:
            raise ShapeRuntimeError(f"{op}(): Expected reduction dim {d} to have non-zero size.",
                                    op=op, operands=[("input", describe(x))],
                                    hint="an empty dim has no max or min; check the slicing that "
                                    "produced it")


class AMax(Reduction):
    """amax / amin, and max() / min() of all elements: ties share the gradient evenly."""

    def __init__(self, dim, keepdim: bool = False, name: str = "amax") -> None:
        super().__init__(dim, keepdim)
        self.name = name
        self.largest = name in ("amax", "max")

    def infer(self, x):
        shape, dt = Reduction.infer(self, x)
        if dt.is_complex:  # PyTorch has no order of complex numbers
            _refuse_complex(self.name, x)
        d = self.dim
        given = not (d is None or (isinstance(d, (tuple, list)) and not d))
        _check_nonempty(self.name, x, self.dims, given)
        return shape, dt

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        xp = self.device.xp
        return (xp.max if self.largest else xp.min)(x, axis=self.dims, keepdims=self.keepdim)

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
        if x.dtype.is_complex:
            _refuse_complex(self.name, x)
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
        xp = self.device.xp
        if x.ndim == 0:
            idx = xp.zeros((), dtype=_int64.np)
            values = x.copy()
        else:
            arg = xp.argmax if self.name == "max" else xp.argmin
            idx = arg(x, axis=self.d, keepdims=True)
            values = xp.take_along_axis(x, idx, axis=self.d)
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
        xp = self.device.xp
        if not self.shape:
            return xp.ones((), dtype=_dt.bool_.np)
        view = [1] * len(self.shape)
        view[self.dim] = self.shape[self.dim]
        return xp.arange(self.shape[self.dim]).reshape(view) == idx


class ArgMax(Op):
    name = "argmax"
    differentiable = False

    def __init__(self, dim, keepdim: bool, name: str = "argmax") -> None:
        self.dim, self.keepdim, self.name = dim, keepdim, name

    def infer(self, x):
        if x.dtype is _dt.bool_:
            raise DTypeError(f"{self.name}(): does not support bool input", op=self.name,
                             operands=[("input", describe(x))], hint="convert with .int()")
        if x.dtype.is_complex:
            _refuse_complex(self.name, x)
        if self.dim is None:
            _check_nonempty(self.name, x, (), False)
            return ((1,) * x.ndim if self.keepdim else ()), _int64
        self.d = _one_dim(self.dim, x, self.name)
        dims = (self.d,) if x.ndim else ()
        _check_nonempty(self.name, x, dims, True)
        return reduced_shape(x.shape, dims, self.keepdim), _int64

    def forward(self, x):
        xp = self.device.xp
        i64 = _int64.np
        fn = xp.argmax if self.name == "argmax" else xp.argmin
        if self.dim is None:
            out = xp.asarray(fn(x), dtype=i64)
            return out.reshape((1,) * x.ndim) if self.keepdim else out
        if x.ndim == 0:
            return xp.zeros((), dtype=i64)
        return fn(x, axis=self.d, keepdims=self.keepdim).astype(i64, copy=False)


@public(method=True)
def amax(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    return apply(AMax(dim, keepdim, "amax"), x)


@public(method=True)
def amin(x: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    return apply(AMax(dim, keepdim, "amin"), x)


def _max_min(name: str, x: Tensor, dim, keepdim: bool):
    if isinstance(dim, Tensor):
        from ..elementwise import maximum, minimum

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


@public(method=True)
def max(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    """max(x): the largest element; max(x, dim): (values, indices); max(x, y): maximum."""
    return _max_min("max", x, dim, keepdim)


@public(method=True)
def min(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    """min(x): the smallest element; min(x, dim): (values, indices); min(x, y): minimum."""
    return _max_min("min", x, dim, keepdim)


@public(method=True)
def argmax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index of the largest value (the first one on ties); dim None: into the flattened x."""
    return apply(ArgMax(dim, keepdim, "argmax"), x)


@public(method=True)
def argmin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return apply(ArgMax(dim, keepdim, "argmin"), x)
