"""Integer semantics: bitwise ops and shifts, C's fmod, truncated division, division by zero.

Bitwise ops are bitwise on integers and logical on bools (NumPy's bitwise_* do both); on
floating-point tensors they raise as PyTorch does. Integer division or remainder by zero
raises (PyTorch's RuntimeError) instead of NumPy's silent 0. Kernels take the op's device's
array namespace `xp`.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ArgumentError, DTypeError, DTypeNotImplementedError, IntegerDivisionError
from ...tensor import Tensor, describe
from ..base import X0, X1, Op, apply
from ..registry import public
from ._common import _NUMBER, _as_operand
from .binary import Binary, _int_zero_check, _real_only
from .scalar import ScalarOp


def _not_for_floats(op: str, x) -> None:
    raise DTypeNotImplementedError(
        f"{op}: not implemented for {x.dtype} (bitwise ops need integer or bool tensors, "
        "shifts integer ones)",
        op=op, operands=[("input", describe(x))],
        hint="cast with .to(sf.int64), or use logical_and/or/xor/not for truth values")


class _IntBinary(Binary):
    """Two integer or bool tensors (promoted); floats raise, and shifts of bools."""

    differentiable = False
    shift = False

    def fn(self, a, b):
        return self.kernel(self.device.xp, a, b)  # kernel(xp, a, b): set by _classes

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if dt.is_floating_point or (dt is _dt.bool_ and self.shift):
            _not_for_floats(self.name, a if a.dtype.is_floating_point else b)
        return shape, dt


class _IntScalar(ScalarOp):
    """An integer or bool tensor with a Python int or bool."""

    differentiable = False
    shift = False

    def infer(self, x):
        shape, dt = ScalarOp.infer(self, x)
        if dt.is_floating_point or (dt is _dt.bool_ and self.shift):
            _not_for_floats(self.name, x)
        return shape, dt

    def forward(self, x):
        npd = self.dt.np
        xp = self.device.xp
        if x.dtype != npd:
            x = x.astype(npd)
        return self.kernel(xp, x, xp.asarray(self.c).astype(npd))


def _shift_left(xp, a, b):
    bits = a.dtype.itemsize * 8
    out = xp.left_shift(a, xp.clip(b, 0, bits - 1).astype(a.dtype))
    return xp.where((b < 0) | (b >= bits), xp.zeros((), a.dtype), out)  # PyTorch gives 0


def _shift_right(xp, a, b):
    bits = a.dtype.itemsize * 8
    # a shift past the width (or negative, read as unsigned) gives the sign fill, as PyTorch
    shift = xp.where((b < 0) | (b >= bits), bits - 1, b).astype(a.dtype)
    return xp.right_shift(a, shift)


# kernel(xp, a, b) for each op
_KERNELS = {"bitwise_and": lambda xp, a, b: xp.bitwise_and(a, b),
            "bitwise_or": lambda xp, a, b: xp.bitwise_or(a, b),
            "bitwise_xor": lambda xp, a, b: xp.bitwise_xor(a, b),
            "bitwise_left_shift": _shift_left, "bitwise_right_shift": _shift_right}


def _classes(name: str) -> tuple[type, type, type]:
    kernel = _KERNELS[name]
    k = staticmethod(kernel)
    rk = staticmethod(lambda xp, x, c: kernel(xp, c, x))  # the number on the left
    cap = "".join(p.capitalize() for p in name.split("_"))
    attrs = {"name": name, "shift": "shift" in name}
    return (type(cap, (_IntBinary,), {**attrs, "kernel": k}),
            type(cap + "Scalar", (_IntScalar,), {**attrs, "kernel": k}),
            type("R" + cap + "Scalar", (_IntScalar,), {**attrs, "kernel": rk}))


BitwiseAnd, BitwiseAndScalar, _RAnd = _classes("bitwise_and")
BitwiseOr, BitwiseOrScalar, _ROr = _classes("bitwise_or")
BitwiseXor, BitwiseXorScalar, _RXor = _classes("bitwise_xor")
BitwiseLeftShift, LeftShiftScalar, RLeftShiftScalar = _classes("bitwise_left_shift")
BitwiseRightShift, RightShiftScalar, RRightShiftScalar = _classes("bitwise_right_shift")


def _int_binary(ops, a, b) -> Tensor:
    tensor_op, scalar_op, rscalar_op = ops
    if isinstance(a, Tensor):
        if isinstance(b, Tensor):
            return apply(tensor_op(), a, b)
        if isinstance(b, float):
            _not_for_floats(tensor_op.name, _as_operand(b, a))
        if isinstance(b, _NUMBER):
            return apply(scalar_op(b), a)
        return apply(tensor_op(), a, _as_operand(b, a))
    if isinstance(b, Tensor):
        if isinstance(a, float):
            _not_for_floats(tensor_op.name, _as_operand(a, b))
        if isinstance(a, _NUMBER):
            return apply(rscalar_op(a), b)
        return apply(tensor_op(), _as_operand(a, b), b)
    raise DTypeError(f"{tensor_op.name}: expected at least one tensor, got "
                     f"{type(a).__name__} and {type(b).__name__}", op=tensor_op.name)


@public(method=True)
def bitwise_and(input, other) -> Tensor:
    """Bitwise AND of integers, logical AND of bools (`&`)."""
    return _int_binary((BitwiseAnd, BitwiseAndScalar, _RAnd), input, other)


@public(method=True)
def bitwise_or(input, other) -> Tensor:
    """Bitwise OR of integers, logical OR of bools (`|`)."""
    return _int_binary((BitwiseOr, BitwiseOrScalar, _ROr), input, other)


@public(method=True)
def bitwise_xor(input, other) -> Tensor:
    """Bitwise XOR of integers, logical XOR of bools (`^`)."""
    return _int_binary((BitwiseXor, BitwiseXorScalar, _RXor), input, other)


def _shift(ops, input, other) -> Tensor:
    return _int_binary(ops, input, other)


@public(method=True)
def bitwise_left_shift(input, other) -> Tensor:
    """input * 2**other on integers (`<<`); shifts past the width give 0."""
    return _shift((BitwiseLeftShift, LeftShiftScalar, RLeftShiftScalar), input, other)


@public(method=True)
def bitwise_right_shift(input, other) -> Tensor:
    """Arithmetic right shift on integers (`>>`); past the width gives the sign fill."""
    return _shift((BitwiseRightShift, RightShiftScalar, RRightShiftScalar), input, other)


class BitwiseNot(Op):
    name = "bitwise_not"
    differentiable = False

    def infer(self, x):
        if x.dtype.is_floating_point:
            _not_for_floats(self.name, x)
        return x.shape, x.dtype

    def forward(self, x):
        return self.device.xp.invert(x)  # logical not on bools


@public(method=True)
def bitwise_not(input: Tensor) -> Tensor:
    """Bitwise NOT of integers (-x - 1), logical NOT of bools."""
    return apply(BitwiseNot(), input)


def invert(input: Tensor) -> Tensor:
    """`~x`: PyTorch raises TypeError on a float tensor (bitwise_not raises RuntimeError)."""
    if input.dtype.is_floating_point:
        raise DTypeError(
            f"~ (operator.invert) is only implemented on integer and bool tensors, got "
            f"{input.dtype}", op="invert", operands=[("input", describe(input))],
            hint="use logical_not() for a truth value, or -x for a negation")
    return apply(BitwiseNot(), input)


# ---- fmod and truncated division ----------------------------------------------------------


class Fmod(Binary):
    """C's remainder: the sign of the dividend (remainder has the divisor's)."""

    name = "fmod"
    infer = _real_only  # neither bools nor complex numbers, as PyTorch

    def saved(self, a, b, out):
        return (X0, X1) if b.requires_grad else ()

    def forward(self, a, b):
        a, b = _operands(self, a, b)
        _int_zero_check(self.name, b)
        xp = self.device.xp
        with xp.errstate(divide="ignore", invalid="ignore"):
            return xp.fmod(a, b)

    def backward(self, g):
        if self._saved:
            a, b = self.saved_tensors
            return g, -g * div(a, b, rounding_mode="trunc")
        return g, None


class FmodScalar(ScalarOp):
    name = "fmod"

    def infer(self, x):
        shape, dt = ScalarOp.infer(self, x)
        if dt is _dt.bool_:
            raise DTypeNotImplementedError("fmod: not implemented for bool", op="fmod")
        if dt.is_complex:  # PyTorch has no complex remainder
            from .complex_parts import refuse_complex

            refuse_complex(self.name, x)
        if not dt.is_floating_point and self.c == 0:
            raise IntegerDivisionError("fmod: integer division by zero", op="fmod")
        return shape, dt

    def fn(self, x, c):
        xp = self.device.xp
        with xp.errstate(divide="ignore", invalid="ignore"):
            return xp.fmod(x, xp.asarray(c).astype(x.dtype))

    def forward(self, x):
        npd = self.dt.np
        return self.fn(x if x.dtype == npd else x.astype(npd), self.c)

    def backward(self, g):
        return (g,)


def _operands(op: Binary, a, b):
    if op.cast:
        npd = op.compute.np
        a = a if a.dtype == npd else a.astype(npd)
        b = b if b.dtype == npd else b.astype(npd)
    return a, b


@public(method=True)
def fmod(input, other) -> Tensor:
    """C's truncated remainder: input - trunc(input / other) * other (sign of input)."""
    if isinstance(input, Tensor) and isinstance(other, _NUMBER):
        return apply(FmodScalar(other), input)
    return apply(Fmod(), _as_operand(input, other if isinstance(other, Tensor) else None),
                 _as_operand(other, input if isinstance(input, Tensor) else None))


class TruncDivide(Binary):
    """Integer division rounded toward zero, in the integer dtype (div rounding_mode='trunc')."""

    name = "div"
    differentiable = False

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if dt is _dt.bool_:
            raise DTypeNotImplementedError("div: trunc division is not implemented for bool",
                                           op="div")
        return shape, dt

    def forward(self, a, b):
        a, b = _operands(self, a, b)
        _int_zero_check(self.name, b)
        xp = self.device.xp
        q = xp.floor_divide(a, b)
        # floor and trunc differ where the remainder is nonzero and the signs differ
        return q + ((xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)


def div(input, other, rounding_mode: str | None = None) -> Tensor:
    """True division, or rounded ('trunc', 'floor') keeping an integer dtype, as PyTorch."""
    from . import binary as B

    if rounding_mode is None:
        return B._binary(B.Div, B.DivScalar, B.RDivScalar, input, other)
    if rounding_mode == "floor":
        return B.floor_divide(input, other)
    if rounding_mode != "trunc":
        raise ArgumentError(f"div expected rounding_mode to be one of None, 'trunc', or "
                            f"'floor' but found {rounding_mode!r}", op="div")
    a = _as_operand(input, other if isinstance(other, Tensor) else None)
    b = _as_operand(other, a)
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        from .unary import trunc

        return trunc(B.div(a, b))
    return apply(TruncDivide(), a, b)
