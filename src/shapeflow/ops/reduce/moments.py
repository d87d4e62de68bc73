"""var and std, with PyTorch's correction / unbiased arguments."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeError
from ...shape import prod_dims
from ...tensor import Tensor
from ..base import OUT, X0, apply
from ..registry import public
from ._common import Reduction, _compute_np, quiet


class Var(Reduction):
    name = "var"

    def __init__(self, dim, correction, keepdim: bool) -> None:
        super().__init__(dim, keepdim)
        self.correction = correction

    def out_dtype(self, dt):
        if dt.is_complex:  # the mean squared modulus: real (complex64 gives float32)
            return _dt.to_real(dt)
        if not dt.is_floating_point:
            raise DTypeError(f"std and var only support floating point and complex dtypes, "
                             f"got {dt}", op=self.name, hint="convert with .float() first")
        return dt

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        xp = self.device.xp
        dt = x.dtype
        n = prod_dims(x.shape[d] for d in self.dims)
        if dt.kind == "c":  # xp.var gives the mean squared modulus, real
            xc, dt = x, x.real.dtype
        else:
            xc = x.astype(_compute_np(_dt.from_numpy_dtype(dt)), copy=False)
        with xp.errstate(invalid="ignore", divide="ignore"):
            if n - self.correction > 0:
                out = xp.var(xc, axis=self.dims, ddof=self.correction, keepdims=self.keepdim)
            else:  # PyTorch: divide by max(0, N - correction), giving inf or nan
                mean_ = xp.mean(xc, axis=self.dims, keepdims=True) if n else 0.0
                ss = xp.sum(xp.abs(xc - mean_) ** 2, axis=self.dims, keepdims=self.keepdim)
                out = ss / 0.0
        return xp.asarray(out).astype(dt, copy=False)

    def backward(self, g):
        (x,) = self.saved_tensors
        centered = x - x.mean(dim=self.dims, keepdim=True)
        with quiet(x, invalid="ignore"):  # N <= correction: inf * 0 is nan, as PyTorch
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
        xp = self.device.xp
        if x.dtype.kind == "c":  # var is real already (float32 for complex64)
            out, dt = Var.forward(self, x), x.real.dtype
        else:
            out = Var.forward(self, x.astype(_compute_np(_dt.from_numpy_dtype(x.dtype)),
                                             copy=False))
            dt = x.dtype
        with xp.errstate(invalid="ignore"):
            return xp.sqrt(out).astype(dt, copy=False)

    def backward(self, g):
        from ..elementwise import where

        x, out = self.saved_tensors
        out = self.keep(out)
        zero = out == 0
        gv = where(zero, 0.0, self.keep(g) / (where(zero, 1.0, out) * 2.0))
        with quiet(x, invalid="ignore"):
            return (gv * (x - x.mean(dim=self.dims, keepdim=True)) * self.grad_scale(),)


def _correction(name: str, dim, unbiased, correction):
    if isinstance(dim, bool):  # var(x, True): the legacy `unbiased` positional
        dim, unbiased = None, dim if unbiased is None else unbiased
    if unbiased is not None and correction is not None:
        raise ShapeError(f"{name}: give either unbiased= or correction=, not both")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, correction


@public(method=True)
def var(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    """Variance with Bessel's correction by default (divide by N - correction)."""
    dim, correction = _correction("var", dim, unbiased, correction)
    return apply(Var(dim, correction, keepdim), x)


@public(method=True)
def std(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
        correction=None) -> Tensor:
    dim, correction = _correction("std", dim, unbiased, correction)
    return apply(Std(dim, correction, keepdim), x)


@public()
def var_mean(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
             correction=None) -> tuple[Tensor, Tensor]:
    """(var, mean) over the same dims, as torch.var_mean."""
    d, _ = _correction("var_mean", dim, unbiased, correction)
    out = var(x, dim, unbiased, keepdim, correction=correction)
    from .sums import mean

    return out, mean(x, d, keepdim)


@public()
def std_mean(x: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
             correction=None) -> tuple[Tensor, Tensor]:
    """(std, mean) over the same dims, as torch.std_mean."""
    d, _ = _correction("std_mean", dim, unbiased, correction)
    out = std(x, dim, unbiased, keepdim, correction=correction)
    from .sums import mean

    return out, mean(x, d, keepdim)
