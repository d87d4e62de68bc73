"""Solves with triangular factors, torch's older names: triangular_solve (B and a triangle
of A), cholesky_solve and cholesky_inverse (A = L L^T given L), with PyTorch's gradients."""

from __future__ import annotations

from collections import namedtuple

from ...errors import DTypeError, ShapeError
from ...shape import broadcast_shapes
from ...tensor import Tensor, describe
from ..base import OUT, X0, Op, Saved, apply
from ..registry import public
from ._common import check_float, check_matrix, lapack
from .inverse import Solve

TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
_KEEP_L_OUT = (Saved.input(1), OUT)
_KEEP_X_OUT = (X0, OUT)


def _check_system(op: str, b: Tensor, a: Tensor) -> tuple:
    """A square, B [.., n, k] of A's dtype; the broadcast batch dims."""
    check_matrix(op, a)
    check_float(op, b)
    if a.dtype is not b.dtype:
        raise DTypeError(f"{op}: A and B must have the same dtype, got {a.dtype} and {b.dtype}",
                         op=op, operands=[("B", describe(b)), ("A", describe(a))])
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"{op}: B must be [*, {a.shape[-1]}, k] for A {describe(a)}, got "
                         f"{describe(b)}", op=op,
                         operands=[("B", describe(b)), ("A", describe(a))])
    return tuple(broadcast_shapes(tuple(b.shape[:-2]), tuple(a.shape[:-2]), op, ("B", "A")))


@public(method=True)
def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,  # noqa: N803
                     unitriangular: bool = False):
    """(X, a copy of A) with T X = b (T^T X = b when transpose), T A's upper or lower
    triangle (ones on its diagonal when unitriangular); batch dims broadcast."""
    from ..movement import diag_embed

    batch = _check_system("triangular_solve", b, A)
    t = A.triu() if upper else A.tril()
    if unitriangular:
        d = t.diagonal(0, -2, -1)
        t = t - diag_embed(d) + diag_embed(d * 0 + 1)
    x = apply(Solve(), t.mT if transpose else t, b)
    cloned = A.expand(batch + tuple(A.shape[-2:])).clone()
    return TriangularSolveResult(x, cloned)


def _lower(xp, factor, upper: bool):
    """The lower factor L of A = L L^T from the triangle that is read."""
    return xp.swapaxes(xp.triu(factor), -1, -2) if upper else xp.tril(factor)


class CholeskySolve(Op):
    """X = A^-1 B for A = L L^T (or U^T U), only L's (U's) triangle read."""

    name = "cholesky_solve"

    def __init__(self, upper: bool) -> None:
        self.upper = upper

    def infer(self, b, factor):
        batch = _check_system(self.name, b, factor)
        return batch + tuple(b.shape[-2:]), b.dtype

    def saved(self, b, factor, out):
        return _KEEP_L_OUT

    def forward(self, b, factor):
        xp = self.device.xp
        low = _lower(xp, factor, self.upper)
        batch = xp.broadcast_shapes(b.shape[:-2], low.shape[:-2])
        low = xp.broadcast_to(low, batch + low.shape[-2:])
        b = xp.broadcast_to(b, batch + b.shape[-2:])
        what = "the factor is singular"
        y = lapack(xp, self.name, what, xp.linalg.solve, low, b)
        return lapack(xp, self.name, what, xp.linalg.solve, xp.swapaxes(low, -1, -2), y)

    def backward(self, g):
        factor, x = self.saved_tensors
        gb = apply(CholeskySolve(self.upper), g, factor)
        if not self.needs_grad(1):
            return gb, None
        # dA = dL L^T + L dL^T and dX = -A^-1 dA X: the factor's gradient is -(S + S^T) L
        # with S = gB X^T (L's right, U's left side), on the whole matrix as PyTorch's
        s = gb @ x.mT
        s = s + s.mT
        return gb, -(factor @ s) if self.upper else -(s @ factor)


@public(method=True)
def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:  # noqa: N803
    """X with A X = B for A = L L^T (or U^T U when upper) given its Cholesky factor."""
    return apply(CholeskySolve(upper), B, L)


class CholeskyInverse(Op):
    """A^-1 for A = L L^T (or U^T U), only L's (U's) triangle read."""

    name = "cholesky_inverse"

    def __init__(self, upper: bool) -> None:
        self.upper = upper

    def infer(self, factor):
        check_matrix(self.name, factor)
        return factor.shape, factor.dtype

    def saved(self, factor, out):
        return _KEEP_X_OUT

    def forward(self, factor):
        xp = self.device.xp
        low = _lower(xp, factor, self.upper)
        a = low @ xp.swapaxes(low, -1, -2)
        return lapack(xp, self.name, "the factor is singular", xp.linalg.inv, a)

    def backward(self, g):
        factor, inv = self.saved_tensors
        # d(A^-1) = -A^-1 dA A^-1: the factor's gradient is -C L (U's: -U C) with
        # C = A^-1 (G + G^T) A^-1, on the whole matrix as PyTorch's
        c = inv @ (g + g.mT) @ inv
        return (-(factor @ c) if self.upper else -(c @ factor),)


@public(method=True)
def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:  # noqa: N803
    """The inverse of A = L L^T (or U^T U when upper) given its Cholesky factor."""
    return apply(CholeskyInverse(upper), L)
