"""Inverses and determinants: inv, det, slogdet, solve (LAPACK through NumPy)."""

from __future__ import annotations

from collections import namedtuple

from ...errors import DTypeError, ShapeError
from ...shape import broadcast_shapes
from ...tensor import Tensor, describe
from ..base import OUT, X0, Op, apply
from ..registry import public
from ._common import check_float, check_matrix, lapack

_KEEP_X_OUT = (X0, OUT)
SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])


class Inv(Op):
    name = "linalg.inv"

    def infer(self, a):
        check_matrix(self.name, a)
        return a.shape, a.dtype

    def saved(self, a, out):
        return (OUT,)

    def forward(self, a):
        xp = self.device.xp
        return lapack(xp, self.name, "the input is singular: it cannot be inverted",
                      xp.linalg.inv, a)

    def backward(self, g):
        (inv_a,) = self.saved_tensors
        t = inv_a.mT
        return (-(t @ g @ t),)


class Det(Op):
    """det(A); its gradient is g * det(A) * A^-T, from the cofactors where A is singular."""

    name = "linalg.det"

    def infer(self, a):
        check_matrix(self.name, a)
        return tuple(a.shape[:-2]), a.dtype

    def saved(self, a, out):
        return _KEEP_X_OUT

    def forward(self, a):
        xp = self.device.xp
        return xp.asarray(xp.linalg.det(a), a.dtype)

    def backward(self, g):
        a, det = self.saved_tensors
        scale = (g * det).unsqueeze(-1).unsqueeze(-1)
        if a._data is None or (det._data != 0).all():  # meta: the shapes are the same
            return (scale * inv(a).mT,)
        return (g.unsqueeze(-1).unsqueeze(-1) * apply(Cofactors(), a),)


class Cofactors(Op):
    """The cofactor matrix det(A) A^-T, from the SVD so that it is exact for singular A."""

    name = "linalg.det_backward"
    differentiable = False

    def infer(self, a):
        return a.shape, a.dtype

    def forward(self, a):
        xp = self.device.xp
        u, s, vh = lapack(xp, "linalg.det", "the SVD did not converge", xp.linalg.svd, a)
        n = s.shape[-1]
        # prod over j != i of s_j, as prefix times suffix products (no division by 0)
        ones = xp.ones(s.shape[:-1] + (1,), s.dtype)
        before = xp.cumprod(xp.concatenate([ones, s[..., :-1]], -1), -1)
        after = xp.flip(xp.cumprod(xp.concatenate([ones, xp.flip(s, -1)[..., :-1]], -1), -1),
                        -1)
        others = before * after
        sign = xp.linalg.det(u) * xp.linalg.det(vh)
        out = (u * others[..., None, :]) @ vh * sign[..., None, None]
        return out.reshape(a.shape) if n else xp.zeros_like(a)


class LogAbsDet(Op):
    """log |det(A)|; its gradient is g * A^-T."""

    name = "linalg.slogdet"

    def infer(self, a):
        check_matrix(self.name, a)
        return tuple(a.shape[:-2]), a.dtype

    def saved(self, a, out):
        return (X0,)

    def forward(self, a):
        xp = self.device.xp
        return xp.asarray(xp.linalg.slogdet(a)[1], a.dtype)

    def backward(self, g):
        (a,) = self.saved_tensors
        return (g.unsqueeze(-1).unsqueeze(-1) * inv(a).mT,)


class DetSign(Op):
    name = "linalg.slogdet"
    differentiable = False

    def infer(self, a):
        check_matrix(self.name, a)
        return tuple(a.shape[:-2]), a.dtype

    def forward(self, a):
        xp = self.device.xp
        return xp.asarray(xp.linalg.slogdet(a)[0], a.dtype)


class Solve(Op):
    """X with A X = B, B a batch of matrices; batch dims broadcast. Complex matrices are
    taken (the eigenvector gradients solve with them); public linalg.solve checks first."""

    name = "linalg.solve"

    def infer(self, a, b):
        check_matrix(self.name, a, complex_ok=True)
        check_float(self.name, b, complex_ok=True)
        if a.dtype is not b.dtype:
            raise DTypeError(f"{self.name}: A and B must have the same dtype, got {a.dtype} "
                             f"and {b.dtype}", op=self.name,
                             operands=[("A", describe(a)), ("B", describe(b))])
        if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
            raise ShapeError(
                f"{self.name}: B's rows ({b.shape[-2] if b.ndim >= 2 else b.shape}) must "
                f"match A's size {a.shape[-1]}", op=self.name,
                operands=[("A", describe(a)), ("B", describe(b))])
        batch = broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), self.name,
                                 ("A", "B"))
        return tuple(batch) + tuple(b.shape[-2:]), a.dtype

    def saved(self, a, b, out):
        return _KEEP_X_OUT if a.requires_grad else (X0,)

    def forward(self, a, b):
        xp = self.device.xp
        if a.ndim > 2 or b.ndim > 2:
            batch = xp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a = xp.broadcast_to(a, batch + a.shape[-2:])
            b = xp.broadcast_to(b, batch + b.shape[-2:])
        return lapack(xp, self.name, "the input is singular: the system has no unique solution",
                      xp.linalg.solve, a, b)

    def backward(self, g):
        saved = self.saved_tensors
        a = saved[0]
        # conjugate transposes: the complex gradients (mH is mT for real matrices)
        gb = apply(Solve(), a.mH, g)
        ga = -(gb @ saved[1].mH) if self.needs_grad(0) else None
        return ga, gb


@public(sf=False, linalg=True)
def inv(a: Tensor) -> Tensor:
    """The inverse of a (batch of) square matrices; LinAlgError where one is singular."""
    return apply(Inv(), a)


@public(method=True, linalg=True)
def det(a: Tensor) -> Tensor:
    """The determinant of a (batch of) square matrices."""
    return apply(Det(), a)


@public(method=True, linalg=True)
def slogdet(a: Tensor):
    """(sign, log |det|) of a (batch of) square matrices; the log has the gradient."""
    return SlogdetResult(apply(DetSign(), a), apply(LogAbsDet(), a))


@public(method=True)
def logdet(a: Tensor) -> Tensor:
    """log det(a): NaN where the determinant is negative, -inf where it is 0."""
    from ..elementwise import where

    sign, logabs = slogdet(a)
    return where(sign < 0, float("nan"), logabs)


@public(sf=False, linalg=True)
def solve(a: Tensor, b: Tensor, *, left: bool = True) -> Tensor:
    """X with A X = B (left) or X A = B; B a vector, a matrix, or batches of either."""
    check_matrix("linalg.solve", a)
    if not left:
        return solve(a.mT, b.mT).mT
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    if vector:
        return apply(Solve(), a, b.unsqueeze(-1)).squeeze(-1)
    return apply(Solve(), a, b)


@public(method=True)
def inverse(a: Tensor) -> Tensor:
    """torch.inverse: linalg.inv."""
    return inv(a)
