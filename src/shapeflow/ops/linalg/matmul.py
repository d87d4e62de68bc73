"""The matrix product primitive: matmul for every rank PyTorch accepts, and mm, bmm, mv,
dot, outer."""

from __future__ import annotations

from ...autograd.autocast_state import hot as _autocast_hot
from ...device import cpu
from ...dtypes import float32, float64, promote_types
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...shape import broadcast_shapes, dims_equal, format_shape, prod_dims
from ...tensor import Tensor, describe
from .. import autocast as _autocast
from ..base import LAYER_INPUT, Op, Saved, apply
from ..registry import public

_A = Saved.input(0, LAYER_INPUT)
_B = Saved.input(1, LAYER_INPUT)
# what matmul keeps: each operand's gradient needs the other operand
_KEEP_B_A, _KEEP_B, _KEEP_A = (_B, _A), (_B,), (_A,)
# Below this many multiply-adds a float product runs as the array's own .dot(): a call into
# the kernel table costs ~5,000 instructions, a 4x4 matmul with grad ~22,000 in all, and
# under it the cpu table would run NumPy's product too (no MKL: its ctypes call costs more).
_DOT_MACS = cpu.kernels.MIN_MACS


def check_matmul(a, b, op: str = "matmul") -> None:
    """The contract of a @ b on the operands as given: ranks, dtypes, contraction size."""
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeRuntimeError(
            f"{op}: both operands need at least 1 dim", op=op,
            operands=[("a", describe(a)), ("b", describe(b))], hint="use * for scalars")
    if a.dtype is not b.dtype:
        raise DTypeError(
            f"{op}: operands have different dtypes ({a.dtype} and {b.dtype})",
            op=op, operands=[("a", describe(a)), ("b", describe(b))],
            hint=f"cast one with .to({promote_types(a.dtype, b.dtype)})")
    if a.dtype.is_bool:
        raise DTypeError(f"{op}: bool tensors cannot be multiplied", op=op,
                         operands=[("a", describe(a)), ("b", describe(b))])
    sa, sb = a.shape, b.shape
    k_a, k_b = sa[-1], (sb[0] if b.ndim == 1 else sb[-2])
    same = dims_equal(k_a, k_b)
    if same:
        return
    rule = (f"({k_a} != {k_b})" if same is False else f"(cannot tell whether {k_a} == {k_b})")
    raise ShapeRuntimeError(
        f"{op}: contraction mismatch: {format_shape(sa)} @ {format_shape(sb)} {rule}",
        op=op, operands=[("a", describe(a)), ("b", describe(b))],
        hint=_transpose_hint(sa, sb))


class Matmul(Op):
    """a @ b for operands of 2 or more dims; batch dims broadcast."""

    name = "matmul"
    dot = False  # set by infer
    fold = False  # infer: a is batched and b a matrix, so b's gradient is one 2-D product

    def infer(self, a, b):
        sa, sb = a.shape, b.shape
        if len(sa) == 2 and len(sb) == 2:  # the common case, unpacked (no Shape indexing)
            (m, k), (k2, n) = sa, sb
            dt = a.dtype
            if a._data is not None:  # a computing device: concrete sizes, plain int arithmetic
                if k != k2 or dt is not b.dtype:
                    check_matmul(a, b)
                # small float products: .dot, decided here on ints rather than in forward
                # (or in the table) on array attributes
                self.dot = m * k * n < _DOT_MACS and (dt is float32 or dt is float64)
                return (m, n), dt
            if dt is not b.dtype or not dims_equal(k, k2):
                check_matmul(a, b)
            return (m, n), dt
        if a.dtype is not b.dtype or not dims_equal(sa[-1], sb[-2]):
            check_matmul(a, b)
        self.fold = len(sb) == 2
        batch = broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2]), "matmul (batch dims)")
        return tuple(batch) + (sa[-2], sb[-1]), a.dtype

    def saved(self, a, b, out):
        if a.requires_grad:
            return _KEEP_B_A if b.requires_grad else _KEEP_B
        return _KEEP_A if b.requires_grad else ()

    def forward(self, a, b):
        return a.dot(b) if self.dot else self.device.kernels.matmul(a, b)

    def backward(self, g):
        saved = list(self.saved_tensors)
        b = saved.pop(0) if self.needs_grad(0) else None
        a = saved.pop(0) if self.needs_grad(1) else None
        if g.dtype.is_complex:  # the products with the conjugate transposes
            b = b.conj() if b is not None else None
            a = a.conj() if a is not None else None
        if a is not None and self.fold:
            # b [k, n] met every matrix of a: one [k, rows] @ [rows, n] product sums them in
            # the accumulator (as PyTorch folds them), not after rounding each one
            # rows spelled out, not -1: a zero-size k or n leaves -1 unsolvable
            rows = prod_dims(tuple(a.shape[:-1]))
            return (g @ b.mT if b is not None else None,
                    a.reshape(rows, a.shape[-1]).mT @ g.reshape(rows, g.shape[-1]))
        # the engine sums over batch dims an operand was broadcast along
        return (g @ b.mT if b is not None else None, a.mT @ g if a is not None else None)


def _transpose_hint(sa, sb) -> str | None:
    if len(sa) >= 2 and dims_equal(sa[-2], sb[0] if len(sb) == 1 else sb[-2]):
        return "the first operand looks transposed: try a.mT @ b (or a.transpose(-2, -1))"
    if len(sb) >= 2 and dims_equal(sa[-1], sb[-1]):
        return "the second operand looks transposed: try a @ b.mT"
    return None


@public(method=True, linalg=True)
def matmul(a: Tensor, b: Tensor) -> Tensor:
    """PyTorch's matmul: 1-D operands gain a dim for the product and lose it after."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        a, b = _autocast.lower(a, b)
    if len(a.shape) >= 2 and len(b.shape) >= 2:
        return apply(Matmul(), a, b)
    check_matmul(a, b)
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    out = apply(Matmul(), a2, b2)
    shape = tuple(out.shape)
    if b.ndim == 1:
        shape = shape[:-1]
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:] if b.ndim != 1 else shape[:-1]
    return out.reshape(shape)


@public(method=True)
def outer(a: Tensor, b: Tensor) -> Tensor:
    """The outer product of two 1-D tensors."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeRuntimeError("outer: both operands must be 1-D", op="outer",
                                operands=[("a", describe(a)), ("b", describe(b))])
    return a.unsqueeze(1) * b.unsqueeze(0)


def _rank_error(op: str, what: str, a: Tensor, b: Tensor) -> ShapeError:
    return ShapeRuntimeError(f"{op}: {what}, got {a.ndim}-D and {b.ndim}-D operands", op=op,
                             operands=[("a", describe(a)), ("b", describe(b))],
                             hint="use matmul (or @) for other ranks")


@public(method=True)
def mm(a: Tensor, b: Tensor) -> Tensor:
    """The product of two matrices (2-D only; matmul broadcasts, mm does not)."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        a, b = _autocast.lower(a, b)
    if a.ndim != 2 or b.ndim != 2:
        raise _rank_error("mm", "both operands must be 2-D matrices", a, b)
    check_matmul(a, b, "mm")
    return apply(Matmul(), a, b)


@public(method=True)
def bmm(a: Tensor, b: Tensor) -> Tensor:
    """A batch of matrix products: [B, n, m] @ [B, m, p] -> [B, n, p], with no broadcasting."""
    if _autocast_hot.on:  # sf.autocast: lower precision
        a, b = _autocast.lower(a, b)
    if a.ndim != 3 or b.ndim != 3:
        raise _rank_error("bmm", "both operands must be 3-D batches of matrices", a, b)
    check_matmul(a, b, "bmm")
    if not dims_equal(a.shape[0], b.shape[0]):
        raise ShapeRuntimeError(
            f"bmm: batch sizes differ ({a.shape[0]} and {b.shape[0]})", op="bmm",
            operands=[("a", describe(a)), ("b", describe(b))],
            hint="bmm does not broadcast the batch dim: use matmul (or @) to broadcast")
    return apply(Matmul(), a, b)


@public(method=True)
def mv(a: Tensor, b: Tensor) -> Tensor:
    """A matrix times a vector: [n, m] @ [m] -> [n]."""
    if a.ndim != 2 or b.ndim != 1:
        raise _rank_error("mv", "expected a 2-D matrix and a 1-D vector", a, b)
    check_matmul(a, b, "mv")
    return matmul(a, b)


@public(method=True)
def dot(a: Tensor, b: Tensor) -> Tensor:
    """The inner product of two 1-D tensors of the same size (a 0-d tensor)."""
    if a.ndim != 1 or b.ndim != 1:
        raise _rank_error("dot", "both operands must be 1-D", a, b)
    check_matmul(a, b, "dot")
    return matmul(a, b)
