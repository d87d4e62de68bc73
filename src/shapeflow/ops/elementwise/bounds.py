"""Elementwise bounds: maximum / minimum of two operands, clamp to numbers or tensors."""

from __future__ import annotations

from ...dtypes import result_type
from ...errors import ShapeError
from ...tensor import Tensor
from ..base import X0, X1, Op, apply
from ..registry import public
from ._common import _as_operand
from .binary import Binary
from .compare import logical_and


class Maximum(Binary):
    name = "maximum"
    ufunc = "maximum"

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if dt.is_complex:  # PyTorch has no order of complex numbers
            from .complex_parts import refuse_complex

            refuse_complex(self.name, a, b)
        return shape, dt

    def saved(self, a, b, out):
        return (X0, X1)

    def backward(self, g):
        a, b = self.saved_tensors
        wa = (a > b) + (a == b) * 0.5  # ties split the gradient, as PyTorch does
        return g * wa, g * (1.0 - wa)


class Minimum(Maximum):
    name = "minimum"
    ufunc = "minimum"

    def backward(self, g):
        a, b = self.saved_tensors
        wa = (a < b) + (a == b) * 0.5
        return g * wa, g * (1.0 - wa)


class Clamp(Op):
    name = "clamp"

    def __init__(self, lo, hi) -> None:
        self.lo, self.hi = lo, hi

    def infer(self, x):
        dt = x.dtype
        if dt.is_complex:  # PyTorch has no order of complex numbers
            from .complex_parts import refuse_complex

            refuse_complex(self.name, x)
        for b in (self.lo, self.hi):
            if b is not None:
                dt = result_type(x, b)
        self.np_dtype = dt.np
        return x.shape, dt

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        out = self.device.xp.clip(x, self.lo, self.hi)
        # NumPy widens bfloat16 (or ints) clipped to Python floats: back to the op's dtype
        return out if out.dtype == self.np_dtype else self.device.kernels.cast(out,
                                                                                self.np_dtype)

    def backward(self, g):
        (x,) = self.saved_tensors
        keep = None
        if self.lo is not None:
            keep = x >= self.lo
        if self.hi is not None:
            upper = x <= self.hi
            keep = upper if keep is None else logical_and(keep, upper)
        return (g * keep,)


@public(method=True)
def maximum(a: Tensor, b: Tensor) -> Tensor:
    return apply(Maximum(), _as_operand(a, b if isinstance(b, Tensor) else None),
                 _as_operand(b, a if isinstance(a, Tensor) else None))


@public(method=True)
def minimum(a: Tensor, b: Tensor) -> Tensor:
    return apply(Minimum(), _as_operand(a, b if isinstance(b, Tensor) else None),
                 _as_operand(b, a if isinstance(a, Tensor) else None))


def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    if min is None and max is None:
        raise ShapeError("clamp: at least one of min and max must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    return apply(Clamp(min, max), x)


clip = clamp

