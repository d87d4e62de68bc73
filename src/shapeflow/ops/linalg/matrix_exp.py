"""The matrix exponential exp(A) = sum A^k / k!, by scaling and squaring a degree-13 Padé
approximant (Higham 2005), with its gradient as the exponential of a block matrix."""

from __future__ import annotations

from ...tensor import Tensor
from ..base import X0, Op, apply
from ..registry import public
from ._common import check_matrix, lapack

# the [13/13] Padé coefficients of exp, and the 1-norm below which it needs no scaling to
# reach double precision (Higham 2005, table 2.3)
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152
_KEEP_X = (X0,)


def _expm(xp, a):
    """exp of a float64 [..., n, n] array, each matrix scaled by its own power of 2."""
    b = _PADE13
    n = a.shape[-1]
    norm = xp.abs(a).sum(-2).max(-1) if n else xp.zeros(a.shape[:-2])
    with xp.errstate(all="ignore"):
        s = xp.ceil(xp.log2(xp.maximum(norm, 1e-300) / _THETA13))
    s = xp.where(xp.isfinite(s), xp.maximum(s, 0), 0).astype(xp.int64)
    x = a / (2.0 ** s)[..., None, None]
    eye = xp.eye(n, dtype=a.dtype)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2)
             + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = (x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2)
         + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye)
    r = lapack(xp, "matrix_exp", "the Padé denominator is singular (non-finite input?)",
               xp.linalg.solve, v - u, v + u)
    top = int(s.max()) if s.size else 0
    for i in range(top):  # undo the scaling: square each matrix its own number of times
        r = xp.where((i < s)[..., None, None], r @ r, r)
    return r


class MatrixExp(Op):
    name = "linalg.matrix_exp"

    def infer(self, a):
        check_matrix(self.name, a)
        return a.shape, a.dtype

    def saved(self, a, out):
        return _KEEP_X

    def forward(self, a):
        xp = self.device.xp
        with xp.errstate(all="ignore"):
            return _expm(xp, a.astype(xp.float64)).astype(a.dtype)

    def backward(self, g):
        from ...factories import zeros
        from ..movement import cat

        (a,) = self.saved_tensors
        # the Fréchet derivative's adjoint: exp([[A^T, G], [0, A^T]]) holds it top right
        n = a.shape[-1]
        at = a.mT.expand(tuple(g.shape))
        low = zeros(*g.shape, dtype=g.dtype, device=g.device)
        block = cat([cat([at, g], -1), cat([low, at], -1)], -2)
        return (apply(MatrixExp(), block)[..., :n, n:],)


@public(method=True, linalg=True)
def matrix_exp(A: Tensor) -> Tensor:  # noqa: N803
    """The matrix exponential of a (batch of) square matrices."""
    return apply(MatrixExp(), A)

