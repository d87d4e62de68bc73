"""Products built from matmul: addmm, addmv, addr, baddbmm, addbmm, inner, vdot, cross, kron,
cdist, tensordot. Composites: their gradients come from the primitives."""

from __future__ import annotations

from ... import dtypes as _dt
from ...autograd.autocast_state import hot as _autocast_hot
from ...errors import ArgumentError, DTypeError, ShapeError
from ...shape import broadcast_shapes, normalize_dim, prod_dims
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..inplace import inplace_method as _inplace
from ..movement import cat, narrow, permute, reshape
from ..reduce import norm
from ..registry import public
from .matmul import bmm, matmul, mm, mv, outer


def _scaled_sum(input: Tensor, prod: Tensor, beta, alpha,  # noqa: A002
                op: str | None = None) -> Tensor:
    """beta * input + alpha * prod; beta 0 ignores input (NaN in it does not propagate).

    As PyTorch's: on bools beta and alpha are truths (and, or); on integers they are
    truncated to ints, or refused when floats where `op` is named (addr's rule).
    """
    if prod.dtype is _dt.bool_:
        beta, alpha = bool(beta), bool(alpha)
        if not alpha:
            prod = prod & False
    elif not prod.dtype.is_floating_point:
        if op is not None and (isinstance(beta, float) or isinstance(alpha, float)):
            which = "beta" if isinstance(beta, float) else "alpha"
            raise ArgumentError(f"{op}: for integral input tensors, argument {which} must not "
                                "be a floating point number", op=op)
        beta, alpha = int(beta), int(alpha)
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        shape = tuple(broadcast_shapes(input.shape, prod.shape, "add"))
        return prod if shape == tuple(prod.shape) else prod.expand(shape).contiguous()
    if prod.dtype is _dt.bool_:
        return input | prod
    return (input if beta == 1 else input * beta) + prod


@public(method=True)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2), for matrices (input broadcasts)."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, mat1, mat2 = _autocast.lower(input, mat1, mat2)
    if (beta == 1 and alpha == 1 and input.ndim == 1 and mat1.ndim == 2 and mat2.ndim == 2
            and input.dtype is mat1.dtype is mat2.dtype and mat1.shape[1] == mat2.shape[0]
            and input.shape[0] == mat2.shape[1]):
        # a row bias: one gemm that starts from it and rounds once (PyTorch's addmm), not
        # a rounded product plus the bias (two roundings in bfloat16/float16)
        from ..nn.linear import linear  # here: ops.nn imports this module

        return linear(mat1, mat2.mT, input)
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@public(method=True)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat @ vec)."""
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@public(method=True)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha, "addr")


@public(method=True)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1,  # noqa: A002
            alpha=1) -> Tensor:
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, batch1, batch2 = _autocast.lower(input, batch1, batch2)
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


@public(method=True)
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1,  # noqa: A002
           alpha=1) -> Tensor:
    """beta * input + alpha * sum over the batch of batch1[i] @ batch2[i]."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        input, batch1, batch2 = _autocast.lower(input, batch1, batch2)
    return _scaled_sum(input, bmm(batch1, batch2).sum(0), beta, alpha)


@public(method=True)
def inner(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002
    """The sum of products over the last dims of both ([*a, n] x [*b, n] -> [*a, *b]);
    a 0-d operand multiplies."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(f"inner: the last dims must match, got {input.shape[-1]} and "
                         f"{other.shape[-1]}", op="inner",
                         operands=[("input", describe(input)), ("other", describe(other))])
    return tensordot(input, other, ([-1], [-1]))


@public(method=True)
def vdot(a: Tensor, b: Tensor) -> Tensor:
    """The dot product of two 1-D tensors, a conjugated (real: the same as dot)."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"vdot: expected two 1-D tensors, got {a.ndim}-D and {b.ndim}-D",
                         op="vdot", operands=[("a", describe(a)), ("b", describe(b))])
    return matmul(a.conj() if a.dtype.is_complex else a, b)


@public(method=True)
def cross(a: Tensor, b: Tensor, dim: int | None = None) -> Tensor:
    """The cross product of 3-vectors along dim (broadcast); without dim, the first of size 3."""
    shape = tuple(broadcast_shapes(a.shape, b.shape, "cross", ("input", "other")))
    if dim is None:  # torch.cross's old default (linalg.cross uses -1)
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dim of size 3 in {describe(a)} and {describe(b)}",
                             op="cross", operands=[("input", describe(a)),
                                                   ("other", describe(b))])
    d = normalize_dim(dim, len(shape), "cross")
    if shape[d] != 3:
        raise ShapeError(f"cross: dim {dim} must have size 3, got {shape[d]}", op="cross",
                         operands=[("input", describe(a)), ("other", describe(b))])
    a, b = a.expand(shape), b.expand(shape)
    a1, a2, a3 = (narrow(a, d, i, 1) for i in range(3))
    b1, b2, b3 = (narrow(b, d, i, 1) for i in range(3))
    return cat([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], d)


@public(method=True)
def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product: every element of a times the whole of b, as blocks."""
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    ea = reshape(a, tuple(x for s in sa for x in (s, 1)))
    eb = reshape(b, tuple(x for s in sb for x in (1, s)))
    return reshape(ea * eb, tuple(x * y for x, y in zip(sa, sb)))


@public()
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each row of x1 [.., P, M] and each of x2 [.., R, M]."""
    if _autocast_hot.on:  # sf.autocast: fp32
        x1, x2 = _autocast.fp32(x1, x2)
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            "cdist: expected x1 [..., P, M] and x2 [..., R, M] with the same M, got "
            f"{describe(x1)} and {describe(x2)}", op="cdist",
            operands=[("x1", describe(x1)), ("x2", describe(x2))])
    if not x1.dtype.is_floating_point:
        raise DTypeError(f"cdist: expected floating point tensors, got {x1.dtype}", op="cdist",
                         operands=[("x1", describe(x1))])
    if p < 0:
        raise ShapeError(f"cdist: p must be non-negative, got {p}", op="cdist")
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # [..., P, R, M]
    return norm(diff, p, dim=-1)


@public()
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Contract the last `dims` dims of a with the first of b, or the listed dim pairs."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        a, b = _autocast.lower(a, b)
    if isinstance(dims, int):
        if dims < 0:
            raise ShapeError(f"tensordot: dims must be non-negative, got {dims}",
                             op="tensordot")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise ShapeError(f"tensordot: both sides need as many dims, got {da} and {db}",
                         op="tensordot")
    da = [normalize_dim(d, a.ndim, "tensordot") for d in da]
    db = [normalize_dim(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        # as PyTorch's: a contracted dim of size 1 broadcasts, so the other side is summed
        if a.shape[i] == 1 and b.shape[j] != 1:
            b = b.sum(j, keepdim=True)
        elif b.shape[j] == 1 and a.shape[i] != 1:
            a = a.sum(i, keepdim=True)
        elif a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"tensordot: contracted dims differ in size: a's dim {i} is {a.shape[i]}, "
                f"b's dim {j} is {b.shape[j]}", op="tensordot",
                operands=[("a", describe(a)), ("b", describe(b))])
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [j for j in range(b.ndim) if j not in db]
    k = 1
    for i in da:
        k *= a.shape[i]
    out_shape = tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b)
    # sizes spelled out, not -1: a zero-size k leaves -1 unsolvable
    am = reshape(permute(a, free_a + da), (prod_dims(a.shape[i] for i in free_a), k))
    bm = reshape(permute(b, db + free_b), (k, prod_dims(b.shape[j] for j in free_b)))
    return reshape(mm(am, bm), out_shape)


addmm_ = public(sf=False, method=True)(_inplace("addmm_", addmm))
addmv_ = public(method=True)(_inplace("addmv_", addmv))
addr_ = public(sf=False, method=True)(_inplace("addr_", addr))
baddbmm_ = public(sf=False, method=True)(_inplace("baddbmm_", baddbmm))
addbmm_ = public(sf=False, method=True)(_inplace("addbmm_", addbmm))


@public(sf=False, linalg=True)
def vander(x: Tensor, *, N: int | None = None) -> Tensor:  # noqa: N803
    """The Vandermonde matrix [.., n, N] of x [.., n]: columns x^0, x^1, ..., x^(N-1)
    (N defaults to n), as running products (finite gradients at x = 0)."""
    from ...factories import ones_like
    from ..reduce import cumprod

    if x.dtype is _dt.bool_:
        raise DTypeError("linalg.vander: bool inputs are not supported", op="linalg.vander",
                         operands=[("x", describe(x))])
    if x.ndim == 0:  # a scalar is one point, as PyTorch's
        x = x.reshape(1)
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise ShapeError(f"linalg.vander: N must be greater than 1, got {n}", op="linalg.vander",
                         operands=[("x", describe(x))])
    col = x.unsqueeze(-1)
    powers = cat([ones_like(col), col.expand(tuple(col.shape[:-1]) + (n - 1,))], -1)
    return cumprod(powers, -1)
