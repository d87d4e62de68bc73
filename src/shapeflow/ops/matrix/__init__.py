"""Matrix products (addmm, baddbmm, kron, tensordot...) and linear algebra (inv, det, solve,
cholesky, qr, svd, eigh, norms): `shapeflow.linalg` is the public face of the latter.

The torch-level names (torch.det, torch.svd returning V, torch.qr with `some`) live here.
"""

from __future__ import annotations

from collections import namedtuple

from ...tensor import Tensor
from . import products as _products
from ._common import LinAlgError  # noqa: F401  (re-exported: shapeflow.linalg)
from .decompositions import cholesky as _cholesky
from .decompositions import qr as _qr
from .decompositions import svd as _svd
from .inverse import det, inv, inverse, logdet, slogdet, solve  # noqa: F401
from .norms import pinverse  # noqa: F401
from .products import *  # noqa: F403
from .products import addbmm_, addmm_, addr_, baddbmm_  # noqa: F401  (methods only)

SVDOldResult = namedtuple("svd", ["U", "S", "V"])


def svd(a: Tensor, some: bool = True, compute_uv: bool = True):
    """torch.svd: (U, S, V) with A = U diag(S) V^T (V, not Vh); reduced unless some=False."""
    u, s, vh = _svd(a, full_matrices=not some)
    if not compute_uv:
        from ...factories import zeros_like

        return SVDOldResult(zeros_like(u), s, zeros_like(vh.mT))
    return SVDOldResult(u, s, vh.mT)


def qr(a: Tensor, some: bool = True):
    """torch.qr: (Q, R), reduced unless some=False."""
    return _qr(a, "reduced" if some else "complete")


def cholesky(a: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky: L with A = L L^T (or U = L^T when upper)."""
    return _cholesky(a, upper=upper)


_LINALG_METHODS = ("det", "logdet", "slogdet", "inverse", "cholesky", "qr", "svd", "pinverse")
METHODS = _products.METHODS + _LINALG_METHODS
__all__ = [*_products.__all__, *_LINALG_METHODS]
