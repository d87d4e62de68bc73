"""Binary arithmetic: two operands broadcast and promoted (add, sub, mul, div, pow, ...)."""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from ...backend.cpu import kernels
from ...dtypes import promote_types, result_type
from ...errors import (
    DTypeError,
    DTypeNotImplementedError,
    DTypeRuntimeError,
    IntegerDivisionError,
    ShapeflowError,
)
from ...shape import broadcast_shapes
from ...tensor import Tensor
from ..base import OUT, X0, X1, Op, apply
from ._common import _NUMBER, _as_operand
from .broadcast_runs import widened
from .scalar import (
    AddScalar,
    DivScalar,
    FloorDivScalar,
    MulScalar,
    PowScalar,
    RDivScalar,
    RemainderScalar,
    RFloorDivScalar,
    RPowScalar,
    RRemainderScalar,
    RSubScalar,
)
from .unary import log

_BOOL = _dt.bool_
_BF16 = _dt.bfloat16


def _bool_subtraction() -> DTypeRuntimeError:
    return DTypeRuntimeError(
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
        "to invert a mask, use the `~` or `logical_not()` operator instead.", op="sub")


class Binary(Op):
    """Two tensors, broadcast; forward computes in the promoted dtype (`self.compute`)."""

    def infer(self, a, b):
        sa, sb = a.shape, b.shape
        try:
            same = sa is sb or sa == sb
        except ShapeflowError:  # symbols that cannot be told apart
            same = False
        if same:
            shape = sa
        else:
            shape = broadcast_shapes(sa, sb, self.name)
            fn = getattr(self, "fn", None)
            if fn is not None:  # short broadcast runs made long (same-shape ops: no cost)
                self.fn = widened(fn)
        if a.dtype is b.dtype:
            dt = a.dtype
        elif bool(sa) == bool(sb):
            dt = promote_types(a.dtype, b.dtype)
        else:
            dt = result_type(a, b)  # a 0-d tensor widens only across categories
        self.compute = dt
        self.cast = not (a.dtype is dt and b.dtype is dt)
        return shape, dt

    rounds_once = False  # bfloat16 values: computed in float32 and rounded, as ml_dtypes does
    # mul and div: a wider 0-d second operand of a 16-bit float one stays float32, as
    # PyTorch's cpu scalars (x * 2**16 is x times 65536, not times float16's inf); a 0-d
    # first operand is rounded to the 16-bit dtype first, as in PyTorch
    opmath_scalar = False

    def forward(self, a, b):
        if self.cast:
            npd = self.compute.np
            if self.opmath_scalar and npd.itemsize == 2 and npd.kind == "f" and (
                    b.ndim == 0 and b.dtype != npd and a.ndim):
                return _with_float32_scalar(self.fn, a, b, npd)
            if a.dtype != npd:
                a = _converted(a, npd)
            if b.dtype != npd:
                b = _converted(b, npd)
        if self.compute is _BF16 and self.rounds_once and a.shape == b.shape:
            out = np.empty(a.shape, a.dtype)  # float32 blocks: the same bits, 3x faster
            if kernels.bf16_binary(self.fn, a, b, out):
                return out
        return self.fn(a, b)


def _with_float32_scalar(fn, a: np.ndarray, b: np.ndarray, npd) -> np.ndarray:
    """fn of a 16-bit float array a and a 0-d b kept in float32, rounded once to npd."""
    a, b = kernels.widen(a.astype(npd, copy=False)), b.astype(np.float32)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return kernels.narrow(np.asarray(fn(a, b)), npd)


def _converted(x: np.ndarray, npd) -> np.ndarray:
    """x as npd; bfloat16 to float32 in a compiled pass (mixed precision's residual adds)."""
    if npd == kernels.F32 and x.dtype == kernels.BF16 and x.ndim:
        return kernels.widen(x)
    return x.astype(npd)


def _int_pow(op: Pow, a, b):
    """Integer powers as PyTorch: a negative exponent gives 1 for base 1, +-1 for -1, else 0."""
    npd = op.compute.np
    a, b = a.astype(npd, copy=False), b.astype(npd, copy=False)
    neg = b < 0
    if not neg.any():
        with np.errstate(over="ignore"):
            return np.power(a, b)
    with np.errstate(over="ignore"):
        out = np.power(a, np.where(neg, 0, b))
    a_b = np.broadcast_to(a, out.shape)
    odd = np.broadcast_to(b % 2 != 0, out.shape)
    fill = np.where(a_b == 1, 1, np.where(a_b == -1, np.where(odd, -1, 1), 0)).astype(npd)
    return np.where(np.broadcast_to(neg, out.shape), fill, out)


def _no_bool(op: Binary, a, b):
    shape, dt = Binary.infer(op, a, b)
    if dt is _dt.bool_:  # PyTorch has no floor division of bools
        raise DTypeNotImplementedError(f"{op.name}: not implemented for bool", op=op.name,
                                       hint="cast to an integer dtype first")
    return shape, dt


def _int_zero_check(op: str, b) -> None:
    """Integer division by zero raises as in PyTorch (NumPy gives 0 silently)."""
    if b.dtype.kind in "iu" and not b.all():
        raise IntegerDivisionError(f"{op}: integer division by zero", op=op,
                                   hint="cast to a float dtype to get inf/nan instead")


class Add(Binary):
    name = "add"
    rounds_once = True
    fn = staticmethod(np.add)

    def backward(self, g):
        return g, g


class Sub(Binary):
    name = "sub"
    rounds_once = True
    fn = staticmethod(np.subtract)

    def infer(self, a, b):
        if a.dtype is _BOOL or b.dtype is _BOOL:
            raise _bool_subtraction()
        return Binary.infer(self, a, b)

    def backward(self, g):
        return g, -g


class Mul(Binary):
    name = "mul"
    rounds_once = True
    opmath_scalar = True
    fn = staticmethod(np.multiply)

    def saved(self, a, b, out):
        # each input's gradient needs only the other input
        if a.requires_grad:
            return _KEEP_X1_X0 if b.requires_grad else _KEEP_X1
        return _KEEP_X0 if b.requires_grad else ()

    def backward(self, g):
        saved = list(self.saved_tensors)
        b = saved.pop(0) if self.needs_grad(0) else None
        a = saved.pop(0) if self.needs_grad(1) else None
        return (g * b if b is not None else None, g * a if a is not None else None)


_KEEP_X1_X0, _KEEP_X1, _KEEP_X0 = (X1, X0), (X1,), (X0,)


class Div(Binary):
    name = "div"
    rounds_once = True
    opmath_scalar = True
    fn = staticmethod(np.true_divide)

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if not dt.is_floating_point:  # true division of integers gives the default float
            dt = self.compute = _dt.default_float
            self.cast = True
        return shape, dt

    def saved(self, a, b, out):
        self.need_b = b.requires_grad
        return (X0, X1) if b.requires_grad else (X1,)

    def forward(self, a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return Binary.forward(self, a, b)

    def backward(self, g):
        if self.need_b:
            a, b = self.saved_tensors
            return g / b, -g * a / (b * b)
        (b,) = self.saved_tensors
        return g / b, None


class Pow(Binary):
    name = "pow"
    fn = staticmethod(np.power)
    infer = _no_bool

    def saved(self, a, b, out):
        self.need_b = b.requires_grad
        return (X0, X1, OUT) if b.requires_grad else (X0, X1)

    def forward(self, a, b):
        if self.compute.category < 2 and self.compute is not _dt.bool_:
            return _int_pow(self, a, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            return Binary.forward(self, a, b)

    def backward(self, g):
        from .compare import where, zeros_scalar_like

        saved = self.saved_tensors
        a, b = saved[0], saved[1]
        zero = zeros_scalar_like(g)
        # PyTorch: the base's gradient is 0 where the exponent is 0 (not 0 * inf), the
        # exponent's is 0 where the base is 0 and the exponent >= 0 (not 0 * log 0)
        ga = where(b == 0, zero, g * b * a ** (b - 1.0)) if self.needs_grad(0) else None
        gb = None
        if self.need_b:
            gb = where((a == 0) & (b >= 0), zero, g * saved[2] * log(a))
        return ga, gb


class FloorDivide(Binary):
    """Floor division (Python's //), in the promoted dtype."""

    name = "floor_divide"
    differentiable = False
    infer = _no_bool

    @staticmethod
    def fn(a, b):
        _int_zero_check("floor_divide", b)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.floor_divide(a, b)


class Remainder(Binary):
    """Python's modulo: the sign of the divisor (fmod has the dividend's)."""

    name = "remainder"
    infer = _no_bool

    def saved(self, a, b, out):
        return (X0, X1) if b.requires_grad else ()

    @staticmethod
    def fn(a, b):
        _int_zero_check("remainder", b)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.remainder(a, b)

    def backward(self, g):
        if self._saved:
            a, b = self.saved_tensors
            return g, -g * floor_divide(a, b)
        return g, None


def _binary(tensor_op, scalar_op, rscalar_op, a, b):
    if isinstance(a, Tensor):
        if isinstance(b, Tensor):
            return apply(tensor_op(), a, b)
        if isinstance(b, _NUMBER):
            return apply(scalar_op(b), a)
        return apply(tensor_op(), a, _as_operand(b, a))
    if isinstance(b, Tensor):
        if isinstance(a, _NUMBER):
            return apply(rscalar_op(a), b)
        return apply(tensor_op(), _as_operand(a, b), b)
    raise DTypeError(f"expected at least one tensor, got {type(a).__name__} and "
                     f"{type(b).__name__}")


def _tensor_operator(op_class, general):
    """`t + u` and kin: two tensors go straight to apply, anything else through `general`."""

    def operator(a, b):
        if isinstance(b, Tensor):
            return apply(op_class(), a, b)
        return general(a, b)

    operator.__name__ = general.__name__
    return operator


def add(a, b, alpha=1) -> Tensor:
    if alpha != 1:
        b = mul(b, alpha)
    return _binary(Add, AddScalar, AddScalar, a, b)


def sub(a, b, alpha=1) -> Tensor:
    if alpha != 1:
        b = mul(b, alpha)
    if isinstance(a, Tensor) and isinstance(b, _NUMBER):
        if a.dtype is _BOOL or type(b) is bool:
            raise _bool_subtraction()
        return apply(AddScalar(-b), a)
    return _binary(Sub, None, RSubScalar, a, b)


def rsub(a, b, alpha=1) -> Tensor:
    """b - alpha * a (sub with the operands swapped)."""
    return sub(b, a, alpha)


def mul(a, b) -> Tensor:
    return _binary(Mul, MulScalar, MulScalar, a, b)


def div(a, b, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is not None:  # 'trunc' and 'floor' keep integer dtypes (integer.py)
        from .integer import div as rounded

        return rounded(a, b, rounding_mode)
    return _binary(Div, DivScalar, RDivScalar, a, b)


true_divide = divide = div
multiply = mul
subtract = sub


def pow(a, b) -> Tensor:  # noqa: A001  (PyTorch's name)
    return _binary(Pow, PowScalar, RPowScalar, a, b)


def floor_divide(a, b) -> Tensor:
    return _binary(FloorDivide, FloorDivScalar, RFloorDivScalar, a, b)


def remainder(a, b) -> Tensor:
    return _binary(Remainder, RemainderScalar, RRemainderScalar, a, b)


