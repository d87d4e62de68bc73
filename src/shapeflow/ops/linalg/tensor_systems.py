"""Linear systems over tensor-shaped operands: tensorinv and tensorsolve flatten the index
groups into a square matrix and solve or invert it (gradients from inv and solve)."""

from __future__ import annotations

import math

from ...errors import ShapeError
from ...tensor import Tensor, describe
from ..registry import public
from .inverse import inv, solve


@public(sf=False, linalg=True)
def tensorinv(A: Tensor, ind: int = 2) -> Tensor:  # noqa: N803
    """The inverse of A for tensordot over ind dims: A [*I, *J] with prod(I) = prod(J) gives
    [*J, *I]."""
    if ind <= 0:
        raise ShapeError(f"linalg.tensorinv: ind must be a positive integer, got {ind}",
                         op="linalg.tensorinv")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if math.prod(rows) != math.prod(cols):
        raise ShapeError(f"linalg.tensorinv: prod(A.shape[:ind]) must equal "
                         f"prod(A.shape[ind:]) (ind={ind}), got {describe(A)}",
                         op="linalg.tensorinv", operands=[("A", describe(A))])
    n = math.prod(rows)
    return inv(A.reshape(n, n)).reshape(cols + rows)


@public(sf=False, linalg=True)
def tensorsolve(A: Tensor, B: Tensor, dims=None) -> Tensor:  # noqa: N803
    """X with tensordot(A, X, X.ndim) = B: A [*lead, *X.shape] after moving `dims` of A to
    the end, lead's and X's sizes each B.numel()."""
    if dims is not None:
        dims = tuple(dims)
        A = A.movedim(dims, tuple(range(A.ndim - len(dims), A.ndim)))  # noqa: N806
    lead, rest = tuple(A.shape[:B.ndim]), tuple(A.shape[B.ndim:])
    if math.prod(rest) != math.prod(tuple(B.shape)) or math.prod(lead) != math.prod(rest):
        raise ShapeError(f"linalg.tensorsolve: A's leading B.ndim dims and its other dims must "
                         f"each hold as many elements as B, got A {describe(A)} and B "
                         f"{describe(B)}", op="linalg.tensorsolve",
                         operands=[("A", describe(A)), ("B", describe(B))])
    n = math.prod(lead)
    return solve(A.reshape(n, n), B.reshape(n)).reshape(rest)
