"""Comparisons, logical ops and predicates (bool results, no gradient), and where."""

from __future__ import annotations

import operator

from ... import dtypes as _dt
from ...dtypes import ALWAYS_BOOL, NO_OPMATH, promote, result_type
from ...errors import DTypeError
from ...shape import broadcast_shapes
from ...tensor import Tensor, describe
from ..base import X0, Op, apply
from ..registry import public
from ._common import _NUMBER, _as_operand
from .binary import Binary
from .scalar import ScalarOp, scalar_result_type


class Compare(Binary):
    """Comparisons and logical ops: bool results, no gradient."""

    differentiable = False
    promotion = ALWAYS_BOOL  # infer gives bool_ itself: the kind's whole rule

    def infer(self, a, b):
        shape, _ = Binary.infer(self, a, b)  # the promoted dtype the comparison runs in
        return shape, _dt.bool_


def _compare(name: str, ufunc: str, op=None) -> type:
    """A comparison class: the namespace's `ufunc`, or the arrays' own operator `op` (the
    same function, without a lookup of the namespace)."""
    attrs = {"name": name, "ufunc": ufunc}
    if op is not None:
        attrs["fn"] = staticmethod(op)
    return type(name.capitalize(), (Compare,), attrs)


class Ordered(Compare):
    """lt, le, gt, ge: complex numbers have no order (a DTypeError, as PyTorch's)."""

    def infer(self, a, b):
        shape, dt = Binary.infer(self, a, b)
        if dt.is_complex:
            from .complex_parts import refuse_complex

            refuse_complex(self.name, a, b)
        return shape, _dt.bool_


def _ordered(name: str, ufunc: str, op) -> type:
    return type(name.capitalize(), (Ordered,), {"name": name, "ufunc": ufunc,
                                                "fn": staticmethod(op)})


Eq, Ne = _compare("eq", "equal", operator.eq), _compare("ne", "not_equal", operator.ne)
Lt, Le = _ordered("lt", "less", operator.lt), _ordered("le", "less_equal", operator.le)
Gt, Ge = _ordered("gt", "greater", operator.gt), _ordered("ge", "greater_equal", operator.ge)
LogicalAnd, LogicalOr = _compare("logical_and", "logical_and"), _compare("logical_or",
                                                                          "logical_or")
LogicalXor = _compare("logical_xor", "logical_xor")


class UnaryPredicate(Op):
    """A bool-valued unary op: the namespace's function `ufunc` ('isnan')."""

    differentiable = False
    promotion = ALWAYS_BOOL
    ufunc: str

    def infer(self, x):
        return x.shape, _dt.bool_

    def forward(self, x):
        return getattr(self.device.xp, self.ufunc)(x)


def _predicate(name: str, ufunc: str | None = None) -> type:
    return type(name, (UnaryPredicate,), {"name": name, "ufunc": ufunc or name})


LogicalNot = _predicate("logical_not")
IsNan, IsInf, IsFinite = _predicate("isnan"), _predicate("isinf"), _predicate("isfinite")


class Where(Op):
    name = "where"
    promotion = NO_OPMATH  # PyTorch's: the values' dtypes by result_type's tiers (a 0-d
    #                        value does not widen a dimensioned one of its category)

    def infer(self, cond, a, b):
        if cond.dtype is not _dt.bool_:
            raise DTypeError(f"where: the condition must be bool, got {cond.dtype}", op="where",
                             operands=[("condition", describe(cond))],
                             hint="compare first, e.g. where(x > 0, ...)")
        shape = broadcast_shapes(cond.shape, a.shape, "where", ("condition", "input"))
        shape = broadcast_shapes(shape, b.shape, "where", ("input", "other"))
        self.compute = a.dtype if a.dtype is b.dtype else promote(NO_OPMATH, a, b)
        return shape, self.compute

    def saved(self, cond, a, b, out):
        return (X0,)

    def forward(self, cond, a, b):
        npd = self.compute.np
        return self.device.xp.where(cond, _cast(a, npd), _cast(b, npd))

    def backward(self, g):
        (cond,) = self.saved_tensors
        zero = zeros_scalar_like(g)
        return None, where(cond, g, zero), where(cond, zero, g)


def _cast(arr, npd):
    return arr if arr.dtype == npd else arr.astype(npd)


# ---- tensor with a Python scalar --------------------------------------------------------


class CompareScalar(ScalarOp):
    differentiable = False
    promotion = ALWAYS_BOOL

    def infer(self, x):
        self.dt = dt = scalar_result_type(x.dtype, self.c)  # raises for a non-number
        if dt.is_complex and self.name not in ("eq", "ne"):  # complex numbers have no order
            from .complex_parts import refuse_complex

            refuse_complex(self.name, x, _as_operand(self.c, x))
        return x.shape, _dt.bool_

    def forward(self, x):
        return self.fn(x, self.c)


def _compare_scalar(name: str, ufunc: str, op) -> type:
    return type(name + "_scalar", (CompareScalar,),
                {"name": name, "ufunc": ufunc, "fn": staticmethod(op)})


_SCALAR_COMPARE = {
    "eq": _compare_scalar("eq", "equal", operator.eq),
    "ne": _compare_scalar("ne", "not_equal", operator.ne),
    "lt": _compare_scalar("lt", "less", operator.lt),
    "le": _compare_scalar("le", "less_equal", operator.le),
    "gt": _compare_scalar("gt", "greater", operator.gt),
    "ge": _compare_scalar("ge", "greater_equal", operator.ge),
}
_TENSOR_COMPARE = {"eq": Eq, "ne": Ne, "lt": Lt, "le": Le, "gt": Gt, "ge": Ge}
_FLIP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


def _comparison(name: str, a, b) -> Tensor:
    if isinstance(a, Tensor):
        if isinstance(b, _NUMBER):
            return apply(_SCALAR_COMPARE[name](b), a)
        return apply(_TENSOR_COMPARE[name](), a, _as_operand(b, a))
    if isinstance(a, _NUMBER) and isinstance(b, Tensor):
        return apply(_SCALAR_COMPARE[_FLIP[name]](a), b)
    return apply(_TENSOR_COMPARE[name](), _as_operand(a, b), _as_operand(b, a))


@public(method=True)
def eq(a, b) -> Tensor:
    return _comparison("eq", a, b)


@public(method=True)
def ne(a, b) -> Tensor:
    return _comparison("ne", a, b)


@public(sf=("lt", "less"), method=("lt", "less"))
def lt(a, b) -> Tensor:
    return _comparison("lt", a, b)


@public(sf=("le", "less_equal"), method=("le", "less_equal"))
def le(a, b) -> Tensor:
    return _comparison("le", a, b)


@public(sf=("gt", "greater"), method=("gt", "greater"))
def gt(a, b) -> Tensor:
    return _comparison("gt", a, b)


@public(sf=("ge", "greater_equal"), method=("ge", "greater_equal"))
def ge(a, b) -> Tensor:
    return _comparison("ge", a, b)


greater, greater_equal, less, less_equal, equal_elementwise = gt, ge, lt, le, eq
not_equal = ne


@public(method=True)
def logical_and(a, b) -> Tensor:
    return apply(LogicalAnd(), _as_operand(a), _as_operand(b, a))


@public(method=True)
def logical_or(a, b) -> Tensor:
    return apply(LogicalOr(), _as_operand(a), _as_operand(b, a))


@public(method=True)
def logical_xor(a, b) -> Tensor:
    return apply(LogicalXor(), _as_operand(a), _as_operand(b, a))


@public(method=True)
def logical_not(x: Tensor) -> Tensor:
    return apply(LogicalNot(), x)


@public(method=True)
def isnan(x: Tensor) -> Tensor:
    return apply(IsNan(), x)


@public(method=True)
def isinf(x: Tensor) -> Tensor:
    return apply(IsInf(), x)


@public(method=True)
def isfinite(x: Tensor) -> Tensor:
    return apply(IsFinite(), x)


@public()
def where(condition: Tensor, input, other) -> Tensor:
    """input where condition holds, else other (numbers broadcast like 0-d tensors)."""
    like = input if isinstance(input, Tensor) else other
    if not isinstance(like, Tensor):
        like = condition
    a = input if isinstance(input, Tensor) else _typed_scalar(input, like)
    b = other if isinstance(other, Tensor) else _typed_scalar(other, like)
    return apply(Where(), condition, a, b)


def _typed_scalar(c, like: Tensor) -> Tensor:
    """A number taking the other operand's dtype when of the same kind (scalar promotion)."""
    dt = result_type(like, c) if like.dtype is not _dt.bool_ else result_type(c)
    return Tensor._make(like.device.asarray(c, dt.np), (), dt, like.device)


def zeros_scalar_like(g: Tensor) -> Tensor:
    return _typed_scalar(0, g)

