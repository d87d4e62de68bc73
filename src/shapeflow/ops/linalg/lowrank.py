"""Randomized low-rank SVD and PCA (Halko, Martinsson and Tropp 2009, algorithms 4.4 and 5.1),
as torch.svd_lowrank / torch.pca_lowrank: a Gaussian sketch, subspace iterations, then the
SVD of the small projected matrix.

Composites of matmul, qr and svd, so gradients and the meta device come with them. The
sketch is drawn from shapeflow's generator (sf.manual_seed makes it repeatable); for a matrix
of rank <= q the results do not depend on it.
"""

from __future__ import annotations

from ...errors import ShapeError
from ...tensor import Tensor
from ..registry import public
from .decompositions import qr, svd


def _approximate_basis(a: Tensor, q: int, niter: int, m_: Tensor | None) -> Tensor:
    """Q with q orthonormal columns such that Q Q^H (A - M) approximates A - M, never
    forming A - M (algorithm 4.4: the range of (A A^H)^niter A R for a Gaussian R)."""
    from ...factories import randn

    def times(x: Tensor, y: Tensor, mean: Tensor | None) -> Tensor:
        return x @ y if mean is None else x @ y - mean @ y

    r = randn(a.shape[-1], q, dtype=a.dtype, device=a.device)
    basis = qr(times(a, r, m_)).Q
    for _ in range(niter):
        basis = qr(times(a.mH, basis, None if m_ is None else m_.mH)).Q
        basis = qr(times(a, basis, m_)).Q
    return basis


def _svd_lowrank(a: Tensor, q: int, niter: int, m_: Tensor | None):
    m, n = a.shape[-2], a.shape[-1]
    if m_ is not None:
        m_ = m_.broadcast_to(tuple(a.shape))
    wide = m < n
    if wide:  # work on the tall A^H: the sketch is of the smaller side
        a = a.mH
        m_ = None if m_ is None else m_.mH
    basis = _approximate_basis(a, q, niter, m_)
    b = basis.mH @ a
    if m_ is not None:
        b = b - basis.mH @ m_
    u, s, vh = svd(b, full_matrices=False)
    u, v = basis @ u, vh.mH
    return (v, s, u) if wide else (u, s, v)


def _check_niter(niter) -> int:
    niter = 2 if niter is None else niter
    if niter < 0:
        raise ShapeError(f"niter(={niter}) must be non-negative integer", op="svd_lowrank")
    return niter


@public()
def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2,  # noqa: N803
                M: Tensor | None = None):  # noqa: N803  (PyTorch's names)
    """(U, S, V) with A - M ~ U diag(S) V^H (M, broadcast to A, defaults to 0): the rank-q
    randomized SVD of a (batch of) matrices, from niter subspace iterations."""
    if A.ndim < 2:
        raise ShapeError(f"svd_lowrank: expected a matrix or a batch of matrices, got "
                         f"{A.ndim} dims", op="svd_lowrank")
    return _svd_lowrank(A, 6 if q is None else q, _check_niter(niter), M)


@public()
def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True,  # noqa: N803
                niter: int = 2):
    """(U, S, V): the randomized rank-q SVD of A, of A minus its column means when center
    (principal directions in V's columns); q defaults to min(6, m, n)."""
    if A.ndim < 2:
        raise ShapeError(f"pca_lowrank: expected a matrix or a batch of matrices, got "
                         f"{A.ndim} dims", op="pca_lowrank")
    m, n = A.shape[-2], A.shape[-1]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ShapeError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}", op="pca_lowrank")
    niter = _check_niter(niter)
    if center:
        A = A - A.mean(dim=-2, keepdim=True)
    return _svd_lowrank(A, q, niter, None)
