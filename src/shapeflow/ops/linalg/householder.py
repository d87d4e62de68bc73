"""Householder reflectors in LAPACK's compact form: geqrf (QR as reflectors below R's
diagonal and their scales tau), householder_product / orgqr (the Q they make) and ormqr (Q
applied to a matrix).

A reflector is H = I - tau v v^H with v = [0, ..., 0, 1, A[i+1:, i]] (LAPACK's larfg: beta
= -sign(Re alpha) |(alpha, x)| lands on R's diagonal; tau = 0 where there is nothing to
reflect). The products are composites of Tensor ops, so their gradients (PyTorch's: none for
geqrf) and the meta device come from the ops they are made of.
"""

from __future__ import annotations

import math
from collections import namedtuple

from ...errors import DTypeError, GraphError, ShapeError
from ...tensor import Tensor, describe
from ..base import Op, apply
from ..registry import public
from ._common import check_matrix, pack, unpack

GeqrfResult = namedtuple("geqrf", ["a", "tau"])


def geqrf_kernel(xp, a):
    """(reflectors below R, tau) of a [..., m, n] array, one column per step vectorized over
    the batch, with LAPACK geqr2's conventions (H_i^H applied to the trailing columns)."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k, size = min(m, n), math.prod(batch)
    r = a.reshape((size, m, n)).copy()
    tau = xp.zeros((size, k), a.dtype)
    cplx = xp.iscomplexobj(a)
    with xp.errstate(all="ignore"):  # inf / nan inputs propagate
        for j in range(k):
            alpha = r[:, j, j].copy()
            x = r[:, j + 1:, j]
            xnorm = xp.sqrt((xp.abs(x) ** 2).sum(axis=1))
            nothing = (xnorm == 0) & ((alpha.imag == 0) if cplx else True)
            # sign(0) is +, as Fortran's SIGN: beta = -|(alpha, x)| then
            beta = -xp.where(alpha.real < 0, -1.0, 1.0) * xp.sqrt(xp.abs(alpha) ** 2 + xnorm ** 2)
            safe_beta = xp.where(nothing, 1.0, beta)
            # (beta - Re alpha) / beta - i Im alpha / beta, as zlarfg
            t = (safe_beta - alpha) / safe_beta
            tau[:, j] = xp.where(nothing, 0, t)
            scale = 1 / xp.where(nothing, 1.0, alpha - safe_beta)
            r[:, j + 1:, j] = x * scale[:, None]
            r[:, j, j] = xp.where(nothing, alpha, beta)
            if j + 1 < n:  # C -= conj(tau) v (v^H C) on the trailing columns
                v = r[:, j:, j].copy()
                v[:, 0] = 1
                c = r[:, j:, j + 1:]
                w = (xp.conj(v)[:, :, None] * c).sum(axis=1)
                c -= xp.conj(tau[:, j])[:, None, None] * v[:, :, None] * w[:, None, :]
    return r.reshape(a.shape), tau.reshape(batch + (k,))


class Geqrf(Op):
    """geqrf's two outputs packed [*batch, m * n + k]; PyTorch defines no derivative."""

    name = "geqrf"

    def infer(self, a):
        check_matrix(self.name, a, square=False, complex_ok=True)
        m, n = a.shape[-2], a.shape[-1]
        self.shapes, self.batch = [(m, n), (min(m, n),)], tuple(a.shape[:-2])
        return self.batch + (m * n + min(m, n),), a.dtype

    def forward(self, a):
        xp = self.device.xp
        r, tau = geqrf_kernel(xp, a)
        return pack(xp, r, tau, batch=self.batch)

    def backward(self, g):
        raise GraphError("the derivative for 'geqrf' is not implemented (as in PyTorch)",
                         op=self.name, hint="use linalg.qr for a differentiable QR")


@public(method=True)
def geqrf(input: Tensor):  # noqa: A002  (PyTorch's name)
    """(a, tau): R on and above a's diagonal, the Householder vectors below it (LAPACK's
    geqrf), with A = H_1 ... H_k R, H_i = I - tau_i v_i v_i^H."""
    op = Geqrf()
    return GeqrfResult(*unpack(apply(op, input), op.shapes))


def _reflectors(a: Tensor) -> Tensor:
    """The vectors v_i as columns: a's strict lower part with ones on the diagonal."""
    from ...factories import eye

    m, n = a.shape[-2], a.shape[-1]
    return a.tril(-1) + eye(m, n, dtype=a.dtype, device=a.device)


def _check_pair(op: str, a: Tensor, tau: Tensor) -> None:
    if a.ndim < 2:
        raise ShapeError(f"{op}: input must have at least 2 dimensions.", op=op,
                         operands=[("input", describe(a))])
    check_matrix(op, a, square=False, complex_ok=True)
    if tau.dtype is not a.dtype:
        raise DTypeError(f"{op}: tau dtype {tau.dtype} does not match input dtype {a.dtype}",
                         op=op, operands=[("input", describe(a)), ("tau", describe(tau))])
    if tau.ndim != a.ndim - 1:
        raise ShapeError(f"{op}: Expected tau to have one dimension less than input, but got "
                         f"tau.ndim equal to {tau.ndim} and input.ndim is equal to {a.ndim}",
                         op=op, operands=[("input", describe(a)), ("tau", describe(tau))])
    if tuple(tau.shape[:-1]) != tuple(a.shape[:-2]):
        raise ShapeError(f"{op}: Expected batch dimensions of tau to be equal to "
                         f"input.shape[:-2], but got {list(tau.shape[:-1])}", op=op,
                         operands=[("input", describe(a)), ("tau", describe(tau))])


def _scale(tau: Tensor, i: int) -> Tensor:
    return tau[..., i:i + 1].unsqueeze(-1)


@public(sf="orgqr", method="orgqr", linalg=True)
def householder_product(A: Tensor, tau: Tensor) -> Tensor:  # noqa: N803  (PyTorch's name)
    """The first n columns of H_1 ... H_k (H_i = I - tau_i v_i v_i^H, v_i below A's diagonal)
    for A [..., m, n] (m >= n) and tau [..., k] (k <= n)."""
    op = "linalg.householder_product"
    _check_pair(op, A, tau)
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    if m < n:
        raise ShapeError(f"torch.{op}: input.shape[-2] must be greater than or equal to "
                         f"input.shape[-1]", op=op, operands=[("input", describe(A))])
    if n < k:
        raise ShapeError(f"torch.{op}: input.shape[-1] must be greater than or equal to "
                         f"tau.shape[-1]", op=op,
                         operands=[("input", describe(A)), ("tau", describe(tau))])
    from ...factories import eye

    v = _reflectors(A)
    q = eye(m, n, dtype=A.dtype, device=A.device).expand(tuple(A.shape)) * 1
    for i in reversed(range(k)):  # Q = H_1 (H_2 (... (H_k I)))
        vi = v[..., :, i:i + 1]
        q = q - _scale(tau, i) * (vi @ (vi.mH @ q))
    return q


@public(method=True)
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True,  # noqa: A002
          transpose: bool = False) -> Tensor:
    """Q C, Q^H C (transpose), C Q or C Q^H (left=False) for the m x m Q = H_1 ... H_k that
    geqrf's (input, tau) stand for, without forming Q."""
    op = "ormqr"
    _check_pair(op, input, tau)
    if other.dtype is not input.dtype:
        raise DTypeError(f"torch.{op}: Expected input and other to have the same dtype, but "
                         f"input has dtype {input.dtype} and other has dtype {other.dtype}",
                         op=op, operands=[("input", describe(input)), ("other", describe(other))])
    if other.ndim != input.ndim:
        raise ShapeError(f"torch.{op}: Expected other to have the same number of dimensions as "
                         f"input, but got other.ndim equal to {other.ndim} and input.ndim is "
                         f"equal to {input.ndim}", op=op,
                         operands=[("input", describe(input)), ("other", describe(other))])
    if tuple(other.shape[:-2]) != tuple(input.shape[:-2]):
        raise ShapeError(f"torch.{op}: Expected batch dimensions of other to be equal to "
                         f"input.shape[:-2], but got {list(other.shape[:-2])}", op=op,
                         operands=[("input", describe(input)), ("other", describe(other))])
    mn = other.shape[-2] if left else other.shape[-1]
    side = "other.shape[-2]" if left else "other.shape[-1]"
    k = tau.shape[-1]
    if k != min(mn, input.shape[-1]):
        raise ShapeError(f"torch.{op}: tau.shape[-1] must be equal to min({side}, "
                         f"input.shape[-1])", op=op,
                         operands=[("tau", describe(tau)), ("other", describe(other))])
    if input.shape[-2] != mn:
        raise ShapeError(f"torch.{op}: {side} must be equal to input.shape[-2]", op=op,
                         operands=[("input", describe(input)), ("other", describe(other))])
    v = _reflectors(input)[..., :, :k]
    # H_i^H = I - conj(tau_i) v v^H; Q C applies H_k first, Q^H C applies H_1^H first
    scales = tau.conj() if transpose else tau
    c = other
    order = range(k) if left == transpose else reversed(range(k))
    for i in order:
        vi = v[..., :, i:i + 1]
        if left:
            c = c - _scale(scales, i) * (vi @ (vi.mH @ c))
        else:
            c = c - _scale(scales, i) * ((c @ vi) @ vi.mH)
    return c
