"""shapeflow.linalg: PyTorch's torch.linalg on NumPy's LAPACK, with gradients.

Batched over leading dims; a singular or non-positive-definite input raises
`LinAlgError` (a RuntimeError, as torch.linalg.LinAlgError), a non-square one a ShapeError.
"""

from __future__ import annotations

from .ops.linalg import matmul
from .ops.matrix import LinAlgError
from .ops.matrix.decompositions import cholesky, eigh, eigvalsh, qr, svd, svdvals
from .ops.matrix.inverse import det, inv, slogdet, solve
from .ops.matrix.norms import cross, matrix_norm, matrix_rank, norm, pinv, vector_norm
from .ops.movement import diagonal as _diagonal
from .tensor import Tensor


def inv_ex(a: Tensor, *, check_errors: bool = False):
    """(inverse, info): info 0 where the inverse exists (this raises where it does not)."""
    from .factories import zeros

    return inv(a), zeros(*a.shape[:-2], dtype="int32", device=a.device)


def diagonal(a: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The diagonals of a batch of matrices (the last two dims by default)."""
    return _diagonal(a, offset, dim1, dim2)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of vectors along dim, broadcasting."""
    return (x * y).sum(dim)


__all__ = ["LinAlgError", "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv",
           "inv_ex", "matmul", "matrix_norm", "matrix_rank", "norm", "pinv", "qr", "slogdet",
           "solve", "svd", "svdvals", "vecdot", "vector_norm"]
