"""Factorizations: cholesky, qr, svd (svdvals), eigh (eigvalsh), pinv, with PyTorch's
gradients.

qr, svd and eigh have several outputs: the op returns them packed in one tensor [*batch,
total] and the functions hand out views of it, so each output's gradient reaches the one
backward through the engine's view gradients.
"""

from __future__ import annotations

import math
from collections import namedtuple

from ...errors import GraphError, ShapeError
from ...tensor import Tensor
from ..base import OUT, X0, Op, apply
from ..registry import public
from ._common import check_matrix, lapack, pack, split_grad, unpack
from .inverse import Solve

QRResult = namedtuple("qr", ["Q", "R"])
SVDResult = namedtuple("svd", ["U", "S", "Vh"])
EighResult = namedtuple("eigh", ["eigenvalues", "eigenvectors"])
_KEEP_OUT = (OUT,)


def _solve(a: Tensor, b: Tensor) -> Tensor:
    return apply(Solve(), a, b)


def _zeros(like: Tensor) -> Tensor:
    from ...factories import zeros

    return zeros(*like.shape, dtype=like.dtype, device=like.device)


def _diag(v: Tensor) -> Tensor:
    from ..movement import diag_embed

    return diag_embed(v)


class Cholesky(Op):
    """L with A = L L^T (the lower triangle of A is read); U = L^T when upper."""

    name = "linalg.cholesky"

    def __init__(self, upper: bool) -> None:
        self.upper = upper

    def infer(self, a):
        check_matrix(self.name, a)
        return a.shape, a.dtype

    def saved(self, a, out):
        return _KEEP_OUT

    def forward(self, a):
        xp = self.device.xp
        low = lapack(xp, self.name, "the factorization could not be completed because the "
                     "input is not positive-definite", xp.linalg.cholesky, a)
        return xp.ascontiguousarray(xp.swapaxes(low, -1, -2)) if self.upper else low

    def backward(self, g):
        (low,) = self.saved_tensors
        if self.upper:
            low, g = low.mT, g.mT
        # Murray (2016): A's gradient is L^-T Phi(L^T gL) L^-1, symmetrized
        ga = (low.mT @ g).tril()
        ga = (ga + ga.tril(-1).mT) * 0.5
        ga = _solve(low.mT, ga)
        return (_solve(low.mT, ga.mT).mT,)


class QR(Op):
    """A = Q R, packed [Q, R]; mode 'reduced', 'complete' or 'r' (no Q)."""

    name = "linalg.qr"

    def __init__(self, mode: str) -> None:
        if mode not in ("reduced", "complete", "r"):
            raise ShapeError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got "
                             f"{mode!r}", op=self.name)
        self.mode = mode

    def infer(self, a):
        check_matrix(self.name, a, square=False)
        m, n = a.shape[-2], a.shape[-1]
        k = min(m, n)
        q = (m, 0) if self.mode == "r" else (m, m) if self.mode == "complete" else (m, k)
        r = (m, n) if self.mode == "complete" else (k, n)
        self.shapes, self.batch, self.mn = [q, r], tuple(a.shape[:-2]), (m, n)
        return self.batch + (q[0] * q[1] + r[0] * r[1],), a.dtype

    def saved(self, a, out):
        return _KEEP_OUT

    def forward(self, a):
        xp = self.device.xp
        q, r = lapack(xp, self.name, "the factorization failed", xp.linalg.qr, a,
                      "complete" if self.mode == "complete" else "reduced")
        if self.mode == "r":
            q = xp.zeros(self.batch + self.shapes[0], a.dtype)
        return pack(xp, q, r, batch=self.batch).astype(a.dtype, copy=False)

    def backward(self, g):
        m, n = self.mn
        if self.mode == "r" or (self.mode == "complete" and m > n):
            raise GraphError(
                f"linalg.qr: the gradient needs Q and is only defined for mode='reduced' "
                f"(or 'complete' with m <= n) (got mode={self.mode!r}, a {m} x {n} input)",
                op=self.name, hint="use mode='reduced'")
        (packed,) = self.saved_tensors
        q, r = unpack(packed, self.shapes)
        gq, gr = split_grad(g, self.shapes)
        if m >= n:
            return (_qr_backward(q, r, gq, gr),)
        # wide (as PyTorch): A = [X | Y], R = [U | V] with X = Q U and Y = Q V, so V = Q^T Y
        # sends gY = Q gV, and Q gets Y gV^T more before the square backward of X = Q U
        u, v = r[..., :, :m], r[..., :, m:]
        gu = gv = None
        if gr is not None:
            gu, gv = gr[..., :, :m], gr[..., :, m:]
            extra = (q @ v) @ gv.mT
            gq = extra if gq is None else gq + extra
        gx = _qr_backward(q, u, gq, gu)
        gy = _zeros(v) if gv is None else q @ gv
        from ..movement import cat

        return (cat([gx, gy], -1),)


def _qr_backward(q: Tensor, r: Tensor, gq, gr) -> Tensor:
    """A's gradient for A = Q R with R square (m >= n): gQ or gR may be None (unused)."""
    # (gQ + Q copyltu(M)) R^-T with M = R gR^T - gQ^T Q (Liao et al. 2019)
    if gq is None and gr is None:
        return _zeros(q @ r)
    m_ = 0
    if gr is not None:
        m_ = r @ gr.mT
    if gq is not None:
        m_ = m_ - gq.mT @ q
    low = m_.tril(-1)
    sym = low + low.mT + _diag(m_.diagonal(0, -2, -1))
    b = q @ sym if gq is None else gq + q @ sym
    return _solve(r, b.mT).mT


@public(sf=False, linalg=True)
def qr(a: Tensor, mode: str = "reduced"):
    """(Q, R) with A = Q R: Q orthonormal columns, R upper triangular."""
    op = QR(mode)
    packed = apply(op, a)
    return QRResult(*unpack(packed, op.shapes))


class SVD(Op):
    """A = U diag(S) Vh, packed [U, S, Vh]; S descending."""

    name = "linalg.svd"

    def __init__(self, full_matrices: bool, compute_uv: bool = True) -> None:
        self.full, self.uv = full_matrices, compute_uv

    def infer(self, a):
        check_matrix(self.name, a, square=False)
        m, n = a.shape[-2], a.shape[-1]
        k = min(m, n)
        if self.uv:
            self.shapes = [(m, m if self.full else k), (k,), (n if self.full else k, n)]
        else:
            self.shapes = [(k,)]
        self.batch, self.mnk = tuple(a.shape[:-2]), (m, n, k)
        total = sum(math.prod(s) for s in self.shapes)
        return self.batch + (total,), a.dtype

    def saved(self, a, out):
        return _KEEP_OUT

    def forward(self, a):
        xp = self.device.xp
        what = "the SVD did not converge"
        if not self.uv:
            s = lapack(xp, self.name, what, xp.linalg.svd, a, False, False)
            return s.reshape(self.batch + (self.mnk[2],)).astype(a.dtype, copy=False)
        u, s, vh = lapack(xp, self.name, what, xp.linalg.svd, a, self.full)
        return pack(xp, u, s, vh, batch=self.batch).astype(a.dtype, copy=False)

    def backward(self, g):
        if not self.uv:
            raise GraphError("linalg.svdvals: internal: the values-only SVD keeps no vectors",
                             op=self.name)
        m, n, k = self.mnk
        (packed,) = self.saved_tensors
        u, s, vh = unpack(packed, self.shapes)
        gu, gs, gvh = split_grad(g, self.shapes)
        if self.full and m != n:  # the extra columns are any orthonormal completion
            u, vh = u[..., :, :k], vh[..., :k, :]
            gu = None if gu is None else gu[..., :, :k]
            gvh = None if gvh is None else gvh[..., :k, :]
        return (svd_backward(u, s, vh, gu, gs, gvh),)


def svd_backward(u, s, vh, gu, gs, gvh) -> Tensor:
    """PyTorch's (real) SVD gradient: only the terms of the outputs that were used."""
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    if gu is None and gvh is None:
        return (u * gs.unsqueeze(-2)) @ vh
    s_row, s_col = s.unsqueeze(-2), s.unsqueeze(-1)
    s2 = s * s
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1)
    e = e + _diag(s2 * 0 + 1)  # 1 on the diagonal, where the skew terms are 0
    if gu is not None:
        uhgu = u.mT @ gu
        uhgu = uhgu - uhgu.mT
    if gvh is not None:
        vhgv = vh @ gvh.mT
        vhgv = vhgv - vhgv.mT
    if gu is not None and gvh is not None:
        ret = (uhgu * s_row + s_col * vhgv) / e
    elif gu is not None:
        ret = (uhgu / e) * s_row
    else:
        ret = s_col * (vhgv / e)
    if gs is not None:
        ret = ret + _diag(gs)
    if m > k and gu is not None:
        ga = u @ ret
        gu_sinv = gu / s_row
        ga = ga + gu_sinv - u @ (u.mT @ gu_sinv)
        return ga @ vh
    if n > k and gvh is not None:
        ga = ret @ vh
        sinv_gvh = gvh / s_col
        ga = ga + sinv_gvh - (sinv_gvh @ vh.mT) @ vh
        return u @ ga
    return u @ ret @ vh


@public(sf=False, linalg=True)
def svd(a: Tensor, full_matrices: bool = True):
    """(U, S, Vh) with A = U diag(S) Vh, singular values descending."""
    op = SVD(full_matrices)
    packed = apply(op, a)
    return SVDResult(*unpack(packed, op.shapes))


class SVDVals(Op):
    """The singular values alone; the gradient needs the vectors, so it keeps U and Vh."""

    name = "linalg.svdvals"

    def infer(self, a):
        check_matrix(self.name, a, square=False)
        m, n = a.shape[-2], a.shape[-1]
        k = min(m, n)
        self.shapes = [(m, k), (k,), (k, n)]
        return tuple(a.shape[:-2]) + (k,), a.dtype

    def saved(self, a, out):
        from ..base import Saved

        self.batch = tuple(a.shape[:-2])
        m, n = a.shape[-2], a.shape[-1]
        k = min(m, n)
        return (Saved.new("uv", self.batch + (m * k + k * n,), a.dtype),)

    def forward(self, a):
        xp = self.device.xp
        u, s, vh = lapack(xp, self.name, "the SVD did not converge", xp.linalg.svd, a, False)
        self.uv = pack(xp, u, vh, batch=u.shape[:-2]).astype(a.dtype, copy=False)
        return s.astype(a.dtype, copy=False)

    def backward(self, gs):
        (uv,) = self.saved_tensors
        u, vh = unpack(uv, [self.shapes[0], self.shapes[2]])
        return ((u * gs.unsqueeze(-2)) @ vh,)


@public(sf=False, linalg=True)
def svdvals(a: Tensor) -> Tensor:
    """The singular values of a (batch of) matrices, descending."""
    if a.requires_grad:
        return apply(SVDVals(), a)
    op = SVD(False, compute_uv=False)
    packed = apply(op, a)
    return packed


class Eigh(Op):
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices, packed [L, V]."""

    name = "linalg.eigh"

    def __init__(self, uplo: str) -> None:
        if uplo not in ("L", "U"):
            raise ShapeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {uplo!r}", op=self.name)
        self.uplo = uplo

    def infer(self, a):
        check_matrix(self.name, a)
        n = a.shape[-1]
        self.shapes, self.batch = [(n,), (n, n)], tuple(a.shape[:-2])
        return self.batch + (n + n * n,), a.dtype

    def saved(self, a, out):
        return _KEEP_OUT

    def forward(self, a):
        xp = self.device.xp
        w, v = lapack(xp, self.name, "the eigenvalue algorithm did not converge",
                      xp.linalg.eigh, a, self.uplo)
        return pack(xp, w, v, batch=self.batch).astype(a.dtype, copy=False)

    def backward(self, g):
        (packed,) = self.saved_tensors
        w, v = unpack(packed, self.shapes)
        gw, gv = split_grad(g, self.shapes)
        if gv is None:
            return ((v * gw.unsqueeze(-2)) @ v.mT,)
        # PyTorch's: V (diag(gL) + skew(V^T gV) / 2 / E) V^T, E_ij = L_j - L_i (1 on the diag)
        vhgv = v.mT @ gv
        vhgv = (vhgv - vhgv.mT) * 0.5
        e = w.unsqueeze(-2) - w.unsqueeze(-1)
        e = e + _diag(w * 0 + 1)
        ret = vhgv / e
        if gw is not None:
            ret = ret + _diag(gw)
        return (v @ ret @ v.mT,)


@public(sf=False, linalg=True)
def eigh(a: Tensor, UPLO: str = "L"):  # noqa: N803  (PyTorch's name)
    """(eigenvalues ascending, eigenvectors as columns) of symmetric matrices."""
    op = Eigh(UPLO)
    packed = apply(op, a)
    return EighResult(*unpack(packed, op.shapes))


@public(sf=False, linalg=True)
def eigvalsh(a: Tensor, UPLO: str = "L") -> Tensor:  # noqa: N803
    """The eigenvalues (ascending) of symmetric matrices."""
    return eigh(a, UPLO).eigenvalues


class Pinv(Op):
    """The Moore-Penrose pseudo-inverse; its gradient is written with pinv itself, so it
    stays finite where singular values repeat (no 1 / (s_i^2 - s_j^2) terms)."""

    name = "linalg.pinv"

    def __init__(self, atol, rtol, hermitian: bool) -> None:
        self.atol, self.rtol, self.hermitian = atol, rtol, hermitian

    def infer(self, a):
        check_matrix(self.name, a, square=self.hermitian)
        return tuple(a.shape[:-2]) + (a.shape[-1], a.shape[-2]), a.dtype

    def saved(self, a, out):
        return (X0, OUT)

    def forward(self, a):
        xp = self.device.xp
        m, n = a.shape[-2], a.shape[-1]
        if a.size == 0:
            return xp.zeros(a.shape[:-2] + (n, m), a.dtype)
        if self.hermitian:  # as PyTorch: eigh of the lower triangle, cut on |eigenvalues|
            w, v = lapack(xp, self.name, "the eigenvalue algorithm did not converge",
                          xp.linalg.eigh, a)
            keep = xp.abs(w) > self._tolerance(xp, xp.abs(w).max(-1, keepdims=True), a)
            inv = xp.where(keep, 1.0 / xp.where(keep, w, 1.0), 0.0)
            return ((v * inv[..., None, :]) @ xp.swapaxes(v, -1, -2)).astype(a.dtype)
        u, s, vh = lapack(xp, self.name, "the SVD did not converge", xp.linalg.svd, a, False)
        keep = s > self._tolerance(xp, s[..., :1], a)
        inv = xp.where(keep, 1.0 / xp.where(keep, s, 1.0), 0.0)
        return (xp.swapaxes(vh, -1, -2) * inv[..., None, :]) @ xp.swapaxes(u, -1, -2)

    def _tolerance(self, xp, top, a):
        """max(atol, rtol * largest) per matrix [..., 1]; rtol's default as PyTorch's."""
        f64 = xp.float64
        atol = xp.asarray(0.0 if self.atol is None else self.atol, f64)
        rtol = self.rtol
        if rtol is None:  # eps * max(m, n), or 0 where a positive atol is given
            default = xp.finfo(a.dtype).eps * max(a.shape[-2], a.shape[-1])
            rtol = default if self.atol is None else xp.where(atol > 0, 0.0, default)
        rtol = xp.asarray(rtol, f64)
        return xp.maximum(atol[..., None], rtol[..., None] * top)

    def backward(self, g):
        a, p = self.saved_tensors
        # PyTorch's pinv_backward (the smaller products first for wide or tall A)
        m, n = a.shape[-2], a.shape[-1]
        ph, gh = p.mT, g.mT
        if m <= n:
            k = gh @ p
            kph = k @ ph
            return (-(p @ k).mT + kph - (a @ p) @ kph + (ph @ p) @ (gh - k @ a),)
        k = p @ gh
        phk = ph @ k
        return (-(k @ p).mT + (gh - a @ k) @ p @ ph + phk - phk @ p @ a,)


@public(sf=False, linalg=True)
def pinv(a: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse: singular values (|eigenvalues| when hermitian) at
    or below max(atol, rtol * largest) count as 0; rtol defaults to eps * max(m, n)."""
    return apply(Pinv(_number(atol), _number(rtol), hermitian), a)


def _number(tol):
    """A tolerance as a float or a device array (a Tensor's values: they get no gradient)."""
    if isinstance(tol, Tensor):
        return tol.detach()._data
    return tol


@public(sf=False, linalg=True)
def cholesky(a: Tensor, *, upper: bool = False) -> Tensor:
    """L (lower triangular) with A = L L^T for symmetric positive-definite A; U = L^T if upper."""
    return apply(Cholesky(upper), a)
