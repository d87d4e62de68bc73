"""Linear algebra: matmul for every rank PyTorch accepts, outer, einsum."""

from __future__ import annotations

import numpy as np

from ..dtypes import promote_types
from ..errors import DTypeError, ShapeError
from ..shape import broadcast_shapes, dims_equal, format_shape
from ..tensor import Tensor, describe
from .base import LAYER_INPUT, Op, Saved, apply

_A = Saved.input(0, LAYER_INPUT)
_B = Saved.input(1, LAYER_INPUT)


def check_matmul(a, b) -> None:
    """The contract of a @ b on the operands as given: ranks, dtypes, contraction size."""
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            "matmul: both operands need at least 1 dim", op="matmul",
            operands=[("a", describe(a)), ("b", describe(b))], hint="use * for scalars")
    if a.dtype is not b.dtype:
        raise DTypeError(
            f"matmul: operands have different dtypes ({a.dtype} and {b.dtype})",
            op="matmul", operands=[("a", describe(a)), ("b", describe(b))],
            hint=f"cast one with .to({promote_types(a.dtype, b.dtype)})")
    if a.dtype.category == 0:
        raise DTypeError("matmul: bool tensors cannot be multiplied", op="matmul",
                         operands=[("a", describe(a)), ("b", describe(b))])
    sa, sb = a.shape, b.shape
    k_a, k_b = sa[-1], (sb[0] if b.ndim == 1 else sb[-2])
    same = dims_equal(k_a, k_b)
    if same:
        return
    rule = (f"({k_a} != {k_b})" if same is False else f"(cannot tell whether {k_a} == {k_b})")
    raise ShapeError(
        f"matmul: contraction mismatch: {format_shape(sa)} @ {format_shape(sb)} {rule}",
        op="matmul", operands=[("a", describe(a)), ("b", describe(b))],
        hint=_transpose_hint(sa, sb))


class Matmul(Op):
    """a @ b for operands of 2 or more dims; batch dims broadcast."""

    name = "matmul"

    def infer(self, a, b):
        sa, sb = a.shape, b.shape
        if a.dtype is not b.dtype or not dims_equal(sa[-1], sb[-2]):
            check_matmul(a, b)
        if len(sa) == 2 and len(sb) == 2:
            return (sa[0], sb[1]), a.dtype
        batch = broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]), "matmul (batch dims)")
        return tuple(batch) + (sa[-2], sb[-1]), a.dtype

    def saved(self, a, b, out):
        self.need = (a.requires_grad, b.requires_grad)
        return ((_B,) if a.requires_grad else ()) + ((_A,) if b.requires_grad else ())

    def forward(self, a, b):
        return np.matmul(a, b)

    def backward(self, g):
        saved = list(self.saved_tensors)
        b = saved.pop(0) if self.need[0] else None
        a = saved.pop(0) if self.need[1] else None
        # the engine sums over batch dims an operand was broadcast along
        return (g @ b.mT if b is not None else None, a.mT @ g if a is not None else None)


def _transpose_hint(sa, sb) -> str | None:
    if len(sa) >= 2 and dims_equal(sa[-2], sb[0] if len(sb) == 1 else sb[-2]):
        return "the first operand looks transposed: try a.mT @ b (or a.transpose(-2, -1))"
    if len(sb) >= 2 and dims_equal(sa[-1], sb[-1]):
        return "the second operand looks transposed: try a @ b.mT"
    return None


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """PyTorch's matmul: 1-D operands gain a dim for the product and lose it after."""
    if a.ndim >= 2 and b.ndim >= 2:
        return apply(Matmul(), a, b)
    check_matmul(a, b)
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    out = apply(Matmul(), a2, b2)
    if b.ndim == 1:
        out = out.squeeze(-1)
    if a.ndim == 1:
        out = out.squeeze(-2)
    return out


def outer(a: Tensor, b: Tensor) -> Tensor:
    """The outer product of two 1-D tensors."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError("outer: both operands must be 1-D", op="outer",
                         operands=[("a", describe(a)), ("b", describe(b))])
    return a.unsqueeze(1) * b.unsqueeze(0)


METHODS = ("matmul", "outer")
__all__ = list(METHODS)
