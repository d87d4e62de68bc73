"""Binary arithmetic: two operands broadcast and promoted (add, sub, mul, div, pow, ...).

Each op computes with its device's array namespace: `ufunc` names the function ('add',
'maximum'), or the op overrides `fn(a, b)`. add, sub, mul and div on operands that need no
cast, widening or bfloat16 rounding (what infer calls `plain`) use the arrays' own Python
operators: every array type has them, and they cost less than any lookup of the namespace.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...dtypes import DEFAULT, INT_TO_FLOAT, promote, promote_types, result_type
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
from ..registry import public
from ._common import _NUMBER, _as_operand
from .broadcast_runs import widen_runs
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
_F32_NP = _dt.float32.np


def _bool_subtraction() -> DTypeRuntimeError:
    return DTypeRuntimeError(
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
        "to invert a mask, use the `~` or `logical_not()` operator instead.", op="sub")


class Binary(Op):
    """Two tensors, broadcast; forward computes in the promoted dtype (`self.compute`)."""

    ufunc: str | None = None  # the array-namespace function computing it, by name
    promotion = DEFAULT  # infer's own fast paths give promote(DEFAULT, a, b)

    def infer(self, a, b):
        sa, sb = a.shape, b.shape
        try:
            same = sa is sb or sa == sb
        except ShapeflowError:  # symbols that cannot be told apart
            same = False
        shape = sa if same else broadcast_shapes(sa, sb, self.name)
        if a.dtype is b.dtype:
            dt = a.dtype
        elif bool(sa) == bool(sb):
            dt = promote_types(a.dtype, b.dtype)
        else:
            dt = result_type(a, b)  # a 0-d tensor widens only across categories
        self.compute = dt
        self.cast = cast = not (a.dtype is dt and b.dtype is dt)
        # operands forward takes as they are: the hot ops' Python-operator path
        self.plain = same and not cast and dt is not _BF16
        return shape, dt

    rounds_once = False  # bfloat16 values: computed in float32 and rounded, as ml_dtypes does
    # mul and div: a wider 0-d second operand of a 16-bit float one stays float32, as
    # PyTorch's cpu scalars (x * 2**16 is x times 65536, not times float16's inf); a 0-d
    # first operand is rounded to the 16-bit dtype first, as in PyTorch
    opmath_scalar = False

    def forward(self, a, b):
        if self.cast:
            npd = self.compute.np
            k = self.device.kernels
            if self.opmath_scalar and npd.itemsize == 2 and npd.kind == "f" and (
                    b.ndim == 0 and b.dtype != npd and a.ndim):
                return _with_float32_scalar(self, k, a, b, npd)
            if a.dtype != npd:  # bfloat16 widened in a compiled pass (residual adds)
                a = k.cast(a, npd)
            if b.dtype != npd:
                b = k.cast(b, npd)
        if self.compute is _BF16 and self.rounds_once and a.shape == b.shape:
            # float32 blocks on cpu: the same bits, 3x faster
            return self.device.kernels.bf16_binary(self.ufunc, a, b)
        if a.shape != b.shape:  # short broadcast runs made long (elementwise: same values)
            a, b = widen_runs(a, b)
        return self.fn(a, b)

    def fn(self, a, b):
        """The op on operands of its compute dtype: the namespace's function `ufunc`."""
        return getattr(self.device.xp, self.ufunc)(a, b)


class FloatBinary(Binary):
    """A binary op whose result is floating point: integers and bools compute in, and give,
    the default float (true division, hypot, atan2, xlogy...)."""

    promotion = INT_TO_FLOAT

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if not dt.is_floating_point:  # floats are kept: promote() (a call) only for the rest
            dt = self.compute = promote(self.promotion, dt)
            self.cast, self.plain = True, False
        return shape, dt


class RealFloatBinary(FloatBinary):
    """A FloatBinary of real numbers only (hypot, atan2, copysign, xlogy...): PyTorch has no
    complex kernel for them, so complex operands are refused here, not by NumPy."""

    def infer(self, a, b):
        if a.dtype.is_complex or b.dtype.is_complex:
            from .complex_parts import REAL_FUNCTION, refuse_complex

            refuse_complex(self.name, a, b, hint=REAL_FUNCTION)
        return FloatBinary.infer(self, a, b)


def _with_float32_scalar(op: Binary, k, a, b, npd):
    """op of a 16-bit float array a and a 0-d b kept in float32, rounded once to npd."""
    a, b = k.cast(a.astype(npd, copy=False), _F32_NP), b.astype(_F32_NP)
    xp = op.device.xp
    with xp.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return k.cast(xp.asarray(op.fn(a, b)), npd)


def _int_pow(xp, npd, a, b):
    """Integer powers as PyTorch: a negative exponent gives 1 for base 1, +-1 for -1, else 0."""
    a, b = a.astype(npd, copy=False), b.astype(npd, copy=False)
    neg = b < 0
    if not neg.any():
        with xp.errstate(over="ignore"):
            return xp.power(a, b)
    with xp.errstate(over="ignore"):
        out = xp.power(a, xp.where(neg, 0, b))
    a_b = xp.broadcast_to(a, out.shape)
    odd = xp.broadcast_to(b % 2 != 0, out.shape)
    fill = xp.where(a_b == 1, 1, xp.where(a_b == -1, xp.where(odd, -1, 1), 0)).astype(npd)
    return xp.where(xp.broadcast_to(neg, out.shape), fill, out)


def _no_bool(op: Binary, a, b):
    shape, dt = Binary.infer(op, a, b)
    if dt is _dt.bool_:  # PyTorch has no floor division of bools
        raise DTypeNotImplementedError(f"{op.name}: not implemented for bool", op=op.name,
                                       hint="cast to an integer dtype first")
    return shape, dt


def _real_only(op: Binary, a, b):
    """floor_divide and remainder: neither bools nor complex numbers (PyTorch has neither)."""
    shape, dt = _no_bool(op, a, b)
    if dt.is_complex:
        from .complex_parts import refuse_complex

        refuse_complex(op.name, a, b)
    return shape, dt


def _int_zero_check(op: str, b) -> None:
    """Integer division by zero raises as in PyTorch (NumPy gives 0 silently)."""
    if b.dtype.kind in "iu" and not b.all():
        raise IntegerDivisionError(f"{op}: integer division by zero", op=op,
                                   hint="cast to a float dtype to get inf/nan instead")


class Add(Binary):
    name = "add"
    rounds_once = True
    ufunc = "add"

    def forward(self, a, b):
        if self.plain:
            return a + b  # the arrays' own operator: their device's add
        return Binary.forward(self, a, b)

    def backward(self, g):
        return g, g


class Sub(Binary):
    name = "sub"
    rounds_once = True
    ufunc = "subtract"

    def infer(self, a, b):
        if a.dtype is _BOOL or b.dtype is _BOOL:
            raise _bool_subtraction()
        return Binary.infer(self, a, b)

    def forward(self, a, b):
        if self.plain:
            return a - b
        return Binary.forward(self, a, b)

    def backward(self, g):
        return g, -g


class Mul(Binary):
    name = "mul"
    rounds_once = True
    opmath_scalar = True
    ufunc = "multiply"

    def forward(self, a, b):
        if self.plain:
            return a * b
        return Binary.forward(self, a, b)

    def saved(self, a, b, out):
        # each input's gradient needs only the other input
        if a.requires_grad:
            return _KEEP_X1_X0 if b.requires_grad else _KEEP_X1
        return _KEEP_X0 if b.requires_grad else ()

    def backward(self, g):
        saved = list(self.saved_tensors)
        b = saved.pop(0) if self.needs_grad(0) else None
        a = saved.pop(0) if self.needs_grad(1) else None
        if g.dtype.is_complex:  # each input's gradient: g times the other's conjugate
            b = b.conj() if b is not None else None
            a = a.conj() if a is not None else None
        return (g * b if b is not None else None, g * a if a is not None else None)


_KEEP_X1_X0, _KEEP_X1, _KEEP_X0 = (X1, X0), (X1,), (X0,)


class Div(FloatBinary):
    name = "div"
    rounds_once = True
    opmath_scalar = True
    ufunc = "true_divide"

    def saved(self, a, b, out):
        self.need_b = b.requires_grad
        return (X0, X1) if b.requires_grad else (X1,)

    def forward(self, a, b):
        with self.device.xp.errstate(divide="ignore", invalid="ignore"):
            return a / b if self.plain else Binary.forward(self, a, b)

    def backward(self, g):
        if self.need_b:
            a, b = self.saved_tensors
            if g.dtype.is_complex:  # conjugated derivatives: 1 / conj(b), -conj(a / b^2)
                return g / b.conj(), -g * (a / (b * b)).conj()
            return g / b, -g * a / (b * b)
        (b,) = self.saved_tensors
        return g / (b if not g.dtype.is_complex else b.conj()), None


class Pow(Binary):
    name = "pow"
    ufunc = "power"
    infer = _no_bool

    def saved(self, a, b, out):
        self.need_b = b.requires_grad
        return (X0, X1, OUT) if b.requires_grad else (X0, X1)

    def forward(self, a, b):
        xp = self.device.xp
        if self.compute.is_integer:
            return _int_pow(xp, self.compute.np, a, b)
        with xp.errstate(divide="ignore", invalid="ignore"):
            return Binary.forward(self, a, b)

    def backward(self, g):
        from .compare import where, zeros_scalar_like

        saved = self.saved_tensors
        a, b = saved[0], saved[1]
        if g.dtype.is_complex:  # conjugated derivatives; 0 where the exponent is 0
            ga = gb = None
            if self.needs_grad(0):
                ga = where(b == 0, 0.0, g * (b * a ** (b - 1.0)).conj())
            if self.need_b:
                gb = g * (saved[2] * log(a)).conj()
            return ga, gb
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
    infer = _real_only

    def fn(self, a, b):
        _int_zero_check("floor_divide", b)
        xp = self.device.xp
        with xp.errstate(divide="ignore", invalid="ignore"):
            return xp.floor_divide(a, b)


class Remainder(Binary):
    """Python's modulo: the sign of the divisor (fmod has the dividend's)."""

    name = "remainder"
    infer = _real_only

    def saved(self, a, b, out):
        return (X0, X1) if b.requires_grad else ()

    def fn(self, a, b):
        _int_zero_check("remainder", b)
        xp = self.device.xp
        with xp.errstate(divide="ignore", invalid="ignore"):
            return xp.remainder(a, b)

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


@public(method=True)
def add(a, b, alpha=1) -> Tensor:
    if alpha != 1:
        b = mul(b, alpha)
    return _binary(Add, AddScalar, AddScalar, a, b)


@public(method=True)
def sub(a, b, alpha=1) -> Tensor:
    if alpha != 1:
        b = mul(b, alpha)
    if isinstance(a, Tensor) and isinstance(b, _NUMBER):
        if a.dtype is _BOOL or type(b) is bool:
            raise _bool_subtraction()
        return apply(AddScalar(-b), a)
    return _binary(Sub, None, RSubScalar, a, b)


@public()
def rsub(a, b, alpha=1) -> Tensor:
    """b - alpha * a (sub with the operands swapped)."""
    return sub(b, a, alpha)


@public(method=True)
def mul(a, b) -> Tensor:
    return _binary(Mul, MulScalar, MulScalar, a, b)


@public(sf=("div", "divide", "true_divide"), method=("div", "divide", "true_divide"))
def div(a, b, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is not None:  # 'trunc' and 'floor' keep integer dtypes (integer.py)
        from .integer import div as rounded

        return rounded(a, b, rounding_mode)
    return _binary(Div, DivScalar, RDivScalar, a, b)


true_divide = divide = div
multiply = public(sf="multiply", method="multiply")(mul)
subtract = public(sf="subtract", method="subtract")(sub)


@public(method=True)
def pow(a, b) -> Tensor:  # noqa: A001  (PyTorch's name)
    return _binary(Pow, PowScalar, RPowScalar, a, b)


@public(method=True)
def floor_divide(a, b) -> Tensor:
    return _binary(FloorDivide, FloorDivScalar, RFloorDivScalar, a, b)


@public(method=True)
def remainder(a, b) -> Tensor:
    return _binary(Remainder, RemainderScalar, RRemainderScalar, a, b)


