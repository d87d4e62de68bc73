"""The vector p-norm over dims (norm)."""

from __future__ import annotations

import math

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeError
from ...tensor import Tensor, describe
from ..base import OUT, X0, apply
from ..registry import public
from ._common import Reduction, _compute_np
from .extrema import amax, amin
from .sums import sum


def _need_float(op: str, x: Tensor) -> None:
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"{op}(): expected a floating point tensor, got {x.dtype}", op=op,
            operands=[("input", describe(x))],
            hint=f"convert first with .float(), or pass dtype= where {op} takes one")


class VectorNorm(Reduction):
    """(sum |x|^p)^(1/p) for finite p > 0; the gradient is 0 where the norm is 0."""

    name = "norm"

    def __init__(self, p, dim, keepdim: bool) -> None:
        super().__init__(dim, keepdim)
        self.p = p

    def out_dtype(self, dt):
        if not dt.is_floating_point:
            raise DTypeError(f"norm(): expected a floating point tensor as input, got {dt}",
                             op="norm", hint="convert with .float() first")
        return dt

    def saved(self, x, out):
        return (X0, OUT)

    def forward(self, x):
        xp = self.device.xp
        dt = x.dtype
        xc = x.astype(_compute_np(_dt.from_numpy_dtype(dt)), copy=False)
        if self.p == 2:
            out = xp.sqrt(xp.sum(xc * xc, axis=self.dims, keepdims=self.keepdim))
        else:
            out = xp.sum(xp.abs(xc) ** self.p, axis=self.dims, keepdims=self.keepdim) ** (
                1.0 / self.p)
        return xp.asarray(out).astype(dt, copy=False)

    def backward(self, g):
        from ..elementwise import abs as abs_
        from ..elementwise import where

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


@public(method=True)
def norm(x: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The p-norm over dim (all elements when None); 'fro' is the 2-norm of the elements."""
    from ..elementwise import abs as abs_

    if dtype is not None:
        x = x.to(dtype)
    if p == "fro" or p is None:
        p = 2
    if p == "nuc":  # the sum of singular values over dim (all dims when None), as PyTorch
        from ..linalg.norms import matrix_norm  # same layer; linalg imports this module

        dims = tuple(range(x.ndim)) if dim is None else dim
        return matrix_norm(x, "nuc", dims, keepdim)
    if isinstance(p, str):
        raise ShapeError(f"norm: p={p!r} is not supported (use a number, 'fro' or 'nuc')")
    if x.dtype.is_complex:  # the norm of the moduli (abs's gradient: PyTorch's convention)
        x = abs_(x)
    if not x.dtype.is_floating_point:
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
    if p < 0:  # sum(|x|^p)^(1/p), as PyTorch's vector norm
        return sum(abs_(x) ** p, dim, keepdim) ** (1.0 / p)
    return apply(VectorNorm(p, dim, keepdim), x)
