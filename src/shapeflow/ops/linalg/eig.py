"""The eigendecomposition of general (non-symmetric) square matrices: eig and eigvals, with
complex outputs and PyTorch's gradient.

Eigenvectors are LAPACK geev's: unit 2-norm columns, each determined only up to a phase
e^{i phi}; a loss that depends on the phase has no gradient (PyTorch's error, here too).
"""

from __future__ import annotations

from collections import namedtuple

from ... import dtypes as _dt
from ...errors import GraphError
from ...tensor import Tensor
from ..base import OUT, Op, apply
from ..registry import public
from ._common import LinAlgError, check_matrix, lapack, pack, split_grad, unpack
from .inverse import Solve

EigResult = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])
_KEEP_OUT = (OUT,)


class Eig(Op):
    """Eigenvalues and right eigenvectors (columns), packed [L, V] in the complex dtype."""

    name = "linalg.eig"

    def infer(self, a):
        check_matrix(self.name, a, complex_ok=True)
        n = a.shape[-1]
        self.shapes, self.batch = [(n,), (n, n)], tuple(a.shape[:-2])
        self.out_dtype = _dt.to_complex(a.dtype)
        return self.batch + (n + n * n,), self.out_dtype

    def saved(self, a, out):
        return _KEEP_OUT

    def forward(self, a):
        xp = self.device.xp
        dt = self.out_dtype.np
        if a.size and not xp.isfinite(a).all():
            raise LinAlgError(f"{self.name}: input tensor should not contain infs or NaNs",
                              op=self.name)
        w, v = lapack(xp, self.name, "the eigenvalue algorithm did not converge",
                      xp.linalg.eig, a)
        # NumPy hands back real arrays when every eigenvalue is real: always complex here
        return pack(xp, w.astype(dt), v.astype(dt), batch=self.batch)

    def backward(self, g):
        (packed,) = self.saved_tensors
        w, v = unpack(packed, self.shapes)
        gw, gv = split_grad(g, self.shapes)
        return (_eig_backward(w, v, gw, gv),)


def _eig_backward(w: Tensor, v: Tensor, gw, gv) -> Tensor:
    """A's gradient for A = V diag(L) V^-1 (V's columns of unit norm; gL or gV may be None):
    V^-H (diag(gL) + offdiag((V^H gV - V^H V diag(Re diag(V^H gV))) / conj(E))) V^H with
    E_ij = L_j - L_i; the real part is taken by the engine for a real A."""
    from ..movement import diag_embed

    vh = v.mH
    if gv is None:
        ret = diag_embed(gw)
    else:
        vhgv = vh @ gv
        diag = vhgv.diagonal(0, -2, -1)
        _check_gauge(diag)
        ret = vhgv - vh @ (v * diag.real.unsqueeze(-2))
        wc = w.conj()
        e = wc.unsqueeze(-2) - wc.unsqueeze(-1)
        e = e + diag_embed(w * 0 + 1)  # the diagonal is replaced below: no division by 0
        ret = ret / e
        ret = ret - diag_embed(ret.diagonal(0, -2, -1))
        if gw is not None:
            ret = ret + diag_embed(gw)
    return apply(Solve(), vh, ret @ vh)


def _check_gauge(diag: Tensor) -> None:
    """Im diag(V^H gV) is 0 for a loss that does not depend on the eigenvectors' phases."""
    data = diag._data
    if data is None:  # meta: no values to check
        return
    if (abs(data.imag) > 1e-2).any():  # PyTorch's tolerance
        raise GraphError(
            "linalg.eig backward: the eigenvectors are specified up to multiplication by "
            "e^{i phi}; the loss depends on this phase, so its gradient is ill-defined",
            op="linalg.eig", hint="use a phase-invariant function of the eigenvectors, "
            "e.g. their abs()")


@public(sf=False, linalg=True)
def eig(A: Tensor):  # noqa: N803  (PyTorch's name)
    """(eigenvalues, eigenvectors as columns) of square matrices, both complex (complex64
    for float32 input, complex128 for float64); eigenvectors of unit norm."""
    op = Eig()
    packed = apply(op, A)
    return EigResult(*unpack(packed, op.shapes))


class EigVals(Op):
    """The eigenvalues alone (no gradient: eigvals of a matrix that needs one goes through
    Eig, whose vectors the gradient needs)."""

    name = "linalg.eigvals"
    differentiable = False

    def infer(self, a):
        check_matrix(self.name, a, complex_ok=True)
        self.out_dtype = _dt.to_complex(a.dtype)
        return tuple(a.shape[:-2]) + (a.shape[-1],), self.out_dtype

    def forward(self, a):
        xp = self.device.xp
        dt = self.out_dtype.np
        # a matrix with infs or NaNs has NaN eigenvalues (PyTorch's), the others their own
        bad = ~xp.isfinite(a).all(axis=(-2, -1))
        w = lapack(xp, self.name, "the eigenvalue algorithm did not converge",
                   xp.linalg.eigvals, xp.where(bad[..., None, None], 0, a))
        return xp.where(bad[..., None], xp.nan, w.astype(dt)).astype(dt)


@public(sf=False, linalg=True)
def eigvals(A: Tensor) -> Tensor:  # noqa: N803
    """The eigenvalues of square matrices (complex), in LAPACK geev's order."""
    if A.requires_grad:
        return eig(A).eigenvalues
    return apply(EigVals(), A)
