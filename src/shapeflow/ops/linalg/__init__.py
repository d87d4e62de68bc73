"""Linear algebra, one home: the matmul primitive, einsum, products built on matmul (addmm,
kron, tensordot...), factorizations (cholesky, qr, svd, eigh), inverses and determinants,
and norms. `shapeflow.linalg` is the public face of the torch.linalg names.

The torch-level names (torch.det, torch.svd returning V, torch.qr with `some`) live here.
"""

from __future__ import annotations

from collections import namedtuple

from ...tensor import Tensor
from ..registry import public
from ._common import LinAlgError  # noqa: F401  (re-exported: shapeflow.linalg)
from .decompositions import cholesky as _cholesky
from .decompositions import qr as _qr
from .decompositions import svd as _svd
from .eig import eig, eigvals  # noqa: F401
from .einsum import Einsum, einsum  # noqa: F401  (Einsum: io/onnx.py's exporters)
from .householder import geqrf, householder_product, ormqr  # noqa: F401
from .info import cholesky_ex, inv_ex, solve_ex  # noqa: F401
from .inverse import det, inv, inverse, logdet, slogdet, solve  # noqa: F401
from .ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: F401
from .least_squares import lstsq  # noqa: F401
from .lowrank import pca_lowrank, svd_lowrank  # noqa: F401
from .lu import lu, lu_factor, lu_factor_ex, lu_solve, lu_unpack  # noqa: F401
from .matmul import Matmul, bmm, dot, matmul, mm, mv, outer  # noqa: F401  (Matmul: io/onnx.py)
from .matrix_exp import matrix_exp  # noqa: F401
from .norms import pinverse  # noqa: F401
from .products import (  # noqa: F401  (re-exported; the in-place ones: methods only)
    addbmm,
    addbmm_,
    addmm,
    addmm_,
    addmv,
    addmv_,
    addr,
    addr_,
    baddbmm,
    baddbmm_,
    cdist,
    cross,
    inner,
    kron,
    tensordot,
    vdot,
)
from .tensor_systems import tensorinv, tensorsolve  # noqa: F401
from .triangular import cholesky_inverse, cholesky_solve, triangular_solve  # noqa: F401

SVDOldResult = namedtuple("svd", ["U", "S", "V"])


@public(method=True)
def svd(a: Tensor, some: bool = True, compute_uv: bool = True):
    """torch.svd: (U, S, V) with A = U diag(S) V^T (V, not Vh); reduced unless some=False."""
    u, s, vh = _svd(a, full_matrices=not some)
    if not compute_uv:
        from ...factories import zeros_like

        return SVDOldResult(zeros_like(u), s, zeros_like(vh.mT))
    return SVDOldResult(u, s, vh.mT)


@public(method=True)
def qr(a: Tensor, some: bool = True):
    """torch.qr: (Q, R), reduced unless some=False."""
    return _qr(a, "reduced" if some else "complete")


@public(method=True)
def cholesky(a: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky: L with A = L L^T (or U = L^T when upper)."""
    return _cholesky(a, upper=upper)
