"""sum, mean, prod and logsumexp over dims."""

from __future__ import annotations

import math
import warnings

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...dtypes import INT_TO_FLOAT, INT_TO_LONG
from ...errors import DTypeError
from ...shape import prod_dims
from ...tensor import Tensor
from .. import autocast as _autocast
from ..base import OUT, X0, apply
from ..registry import public
from ._common import Reduction, _compute_np, reduced_shape


class Sum(Reduction):
    name = "sum"
    promotion = INT_TO_LONG  # PyTorch sums ints and bools as int64

    def forward(self, x):
        dt = self.out_dtype(_dt.from_numpy_dtype(x.dtype)).np
        # bfloat16/float16 sum in float32, as PyTorch's
        return self.device.kernels.sum(x, self.dims, self.keepdim, dt)

    def backward(self, g):
        return (self.expand_grad(g),)


class Mean(Reduction):
    name = "mean"

    def out_dtype(self, dt):
        if not (dt.is_floating_point or dt.is_complex):
            raise DTypeError(
                f"mean(): could not infer output dtype. Input dtype must be a floating point "
                f"dtype, got {dt}", op="mean",
                hint="pass dtype=sf.float32, or convert with .float() first")
        return dt

    def forward(self, x):
        xp = self.device.xp
        dt = x.dtype
        acc = _compute_np(_dt.from_numpy_dtype(dt))
        if x.size == 0:  # the mean of nothing is nan, as in PyTorch (without NumPy's warning)
            with warnings.catch_warnings(), xp.errstate(invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                out = xp.mean(x, axis=self.dims, keepdims=self.keepdim, dtype=acc)
        else:  # NumPy's mean is this: the sum in acc, divided by the count
            out = self.device.kernels.sum(x, self.dims, self.keepdim, acc)
            out /= math.prod(x.shape[d] for d in self.dims)
        return xp.asarray(out).astype(dt, copy=False)

    def backward(self, g):
        n = prod_dims(self.in_shape[d] for d in self.dims)
        if type(n) is not int:  # symbolic sizes exist only on meta, where values do not matter
            return (self.expand_grad(g),)
        return (self.expand_grad(g / n),)


class Prod(Reduction):
    name = "prod"
    promotion = INT_TO_LONG

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        dt = self.out_dtype(_dt.from_numpy_dtype(x.dtype)).np
        return self.device.xp.prod(x, axis=self.dims, keepdims=self.keepdim, dtype=dt)

    def backward(self, g):
        # d prod / d x_i = prod of the others: out / x_i where x_i != 0; where x has exactly
        # one zero in the slice, the zero gets the product of the rest; with two or more, 0.
        from ..elementwise import where

        x, out = self.saved_tensors
        dims = self.dims
        is_zero = x == 0
        safe_x = where(is_zero, 1.0, x)
        one_zero = is_zero.sum(dim=dims, keepdim=True) == 1
        at_zero = where(one_zero, prod(safe_x, dims, keepdim=True), 0.0)
        others = where(is_zero, at_zero, self.keep(out) / safe_x)
        return (self.keep(g) * (others if not others.dtype.is_complex else others.conj()),)


class LogSumExp(Reduction):
    name = "logsumexp"
    promotion = INT_TO_FLOAT

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        xp = self.device.xp
        dt = self.out_dtype(_dt.from_numpy_dtype(x.dtype))
        xc = x.astype(_compute_np(dt), copy=False)
        m = xp.max(xc, axis=self.dims, keepdims=True, initial=-xp.inf)
        m = xp.where(xp.isfinite(m), m, 0.0).astype(xc.dtype, copy=False)
        with xp.errstate(divide="ignore", invalid="ignore", over="ignore"):
            s = xp.sum(xp.exp(xc - m), axis=self.dims, keepdims=True)
            out = xp.log(s) + m
        if not self.keepdim:
            out = out.reshape(reduced_shape(x.shape, self.dims, False))
        return out.astype(dt.np, copy=False)

    def backward(self, g):
        from ..elementwise import exp

        x, out = self.saved_tensors
        return (self.keep(g) * exp(x - self.keep(out)),)


@public(method=True)
def sum(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A001
    out = apply(Sum(dim, keepdim), x)
    return out if dtype is None else out.to(dtype)


@public(method=True)
def mean(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    if dtype is not None:
        x = x.to(dtype)
    return apply(Mean(dim, keepdim), x)


@public(method=True)
def prod(x: Tensor, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    if _autocast_hot.on:  # sf.autocast: fp32
        x, = _autocast.fp32(x)
    if dtype is None:
        return apply(Prod(dim, keepdim), x)
    x = x.to(dtype)
    out = apply(Prod(dim, keepdim), x)
    # an explicit dtype is also the result's (bool and narrow ints would widen to int64)
    return out if out.dtype is x.dtype else out.to(x.dtype)


@public(method=True)
def logsumexp(x: Tensor, dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over dim, computed without overflow."""
    return apply(LogSumExp(dim, keepdim), x)
