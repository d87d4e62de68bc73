"""shapeflow.linalg: PyTorch's torch.linalg on NumPy's LAPACK, with gradients.

Batched over leading dims; a singular or non-positive-definite input raises
`LinAlgError` (a RuntimeError, as torch.linalg.LinAlgError), a non-square one a ShapeError.
"""

from __future__ import annotations

from .ops import registry as _registry
from .ops.linalg._common import LinAlgError
from .ops.linalg.inverse import inv
from .ops.linalg.matmul import matmul
from .ops.movement import diagonal as _diagonal
from .tensor import Tensor

# linalg.<op>: every op function declared @public(linalg=...) (ops/registry.py)
_REGISTERED = _registry.namespace("linalg")
globals().update(_REGISTERED)


def diagonal(a: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of a batch of matrices (the last two dims by default)."""
    return _diagonal(a, offset, dim1, dim2)


def multi_dot(tensors) -> Tensor:
    """The product of a chain of matrices (first and last may be vectors), left to right."""
    from .errors import ShapeError

    tensors = list(tensors)
    if len(tensors) < 2:
        raise ShapeError(f"linalg.multi_dot: expected at least 2 tensors, got {len(tensors)}",
                         op="linalg.multi_dot")
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def matrix_power(a: Tensor, n: int) -> Tensor:
    """a @ a @ ... (n times) for square matrices; n = 0 gives I, n < 0 powers of inv(a)."""
    from .factories import eye
    from .ops.linalg._common import check_matrix

    check_matrix("linalg.matrix_power", a)
    if n == 0:
        return eye(a.shape[-1], dtype=a.dtype, device=a.device).expand(tuple(a.shape)) + 0
    base, out = (inv(a) if n < 0 else a), None
    n = abs(n)
    while n:  # square and multiply: log2(n) products
        if n & 1:
            out = base if out is None else out @ base
        n >>= 1
        if n:
            base = base @ base
    return out


def solve_triangular(a: Tensor, b: Tensor, *, upper: bool, left: bool = True,
                     unitriangular: bool = False) -> Tensor:
    """X with T X = B (or X T = B) where T is a's upper or lower triangle (its diagonal taken
    as ones when unitriangular); only that triangle gets a gradient."""
    from .ops.base import apply
    from .ops.linalg.inverse import Solve
    from .ops.movement import diag_embed

    t = a.triu() if upper else a.tril()
    if unitriangular:
        d = t.diagonal(0, -2, -1)
        t = t - diag_embed(d) + diag_embed(d * 0 + 1)
    if not left:
        return apply(Solve(), t.mT, b.mT).mT
    return apply(Solve(), t, b)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of vectors along dim, broadcasting."""
    return (x * y).sum(dim)


# the op functions, and the ones written here over them
__all__ = ["LinAlgError", *_REGISTERED, "diagonal", "matrix_power", "multi_dot",
           "solve_triangular", "vecdot"]
