"""Elementwise ops: unary math, binary arithmetic with broadcasting, comparisons, casts."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..device import Device, cpu, meta
from ..dtypes import DType, promote_types, result_type
from ..errors import DeviceError, DTypeError, ShapeflowError
from ..shape import broadcast_shapes
from ..tensor import Tensor, describe
from . import gelu_kernels
from .base import OUT, OUT_ACT, X0, X0_ACT, X1, Op, apply

_f32 = _dt.float32


def _float_dtype(x: Tensor) -> DType:
    """Math on ints gives the default float (torch.exp(int tensor) is float32)."""
    return x.dtype if x.dtype.category == 2 else _dt.default_float


def _cast(arr, dtype: DType):
    return arr if arr.dtype is dtype.np or arr.dtype == dtype.np else arr.astype(dtype.np)


# ---- unary ------------------------------------------------------------------------------
class Unary(Op):
    """A float-valued unary op: the output has the input's shape and (float) dtype."""

    def infer(self, x):
        return x.shape, _float_dtype(x)

    def forward(self, x):
        if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
            x = x.astype(_dt.default_float.np)
        return self.fn(x)


class Neg(Op):
    name = "neg"

    def infer(self, x):
        if x.dtype is _dt.bool_:
            raise DTypeError("neg: negation of a bool tensor is not defined", op="neg",
                             operands=[("x", describe(x))], hint="use logical_not()")
        return x.shape, x.dtype

    def forward(self, x):
        return np.negative(x)

    def backward(self, g):
        return (-g,)


class Abs(Op):
    name = "abs"

    def infer(self, x):
        return x.shape, x.dtype

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        return np.abs(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * sign(x),)


class Sign(Op):
    name = "sign"

    def infer(self, x):
        return x.shape, x.dtype

    def forward(self, x):
        return np.sign(x)

    def backward(self, g):
        from ..factories import zeros_like

        return (zeros_like(g),)


class Exp(Unary):
    name = "exp"
    fn = staticmethod(np.exp)

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * out,)


class Log(Unary):
    name = "log"
    fn = staticmethod(np.log)

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return Unary.forward(self, x)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g / x,)


class Log1p(Log):
    name = "log1p"
    fn = staticmethod(np.log1p)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g / (x + 1.0),)


class Expm1(Unary):
    name = "expm1"
    fn = staticmethod(np.expm1)

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * (out + 1.0),)


class Sqrt(Unary):
    name = "sqrt"
    fn = staticmethod(np.sqrt)

    def saved(self, x, out):
        return (OUT,)

    def forward(self, x):
        with np.errstate(invalid="ignore"):
            return Unary.forward(self, x)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g / (out * 2.0),)


class Rsqrt(Unary):
    name = "rsqrt"

    def saved(self, x, out):
        return (OUT,)

    @staticmethod
    def fn(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.reciprocal(np.sqrt(x))

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * (out * out * out) * -0.5,)


class Sin(Unary):
    name = "sin"
    fn = staticmethod(np.sin)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * cos(x),)


class Cos(Unary):
    name = "cos"
    fn = staticmethod(np.cos)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (-g * sin(x),)


class Tanh(Unary):
    name = "tanh"
    fn = staticmethod(np.tanh)

    def saved(self, x, out):
        return (OUT_ACT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * (1.0 - out * out),)


def _sigmoid(x):
    # 0.5 * (1 + tanh(x / 2)) never overflows, unlike 1 / (1 + exp(-x))
    out = np.asarray(x * 0.5)  # an array even for 0-d input, so the in-place steps work
    np.tanh(out, out=out)
    out += 1.0
    out *= 0.5
    return out


class Sigmoid(Unary):
    name = "sigmoid"
    fn = staticmethod(_sigmoid)

    def saved(self, x, out):
        return (OUT_ACT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * out * (1.0 - out),)


class Relu(Op):
    name = "relu"

    def infer(self, x):
        return x.shape, x.dtype

    def saved(self, x, out):
        return (OUT_ACT,)

    def forward(self, x):
        return np.maximum(x, 0)

    def backward(self, g):
        (out,) = self.saved_tensors
        if not grad_mode.state.enabled and g.dtype is out.dtype:  # no grad of grad: one op
            return (apply(ReluBackward(), g, out),)
        return (g * (out > 0),)


class _GradKernel(Op):
    """A fused backward `forward(g, x)`: the gradient of x, with x's shape and dtype.

    Not differentiable itself: with create_graph the op's backward takes its composite path.
    """

    differentiable = False

    def infer(self, g, x):
        return x.shape, x.dtype


class ReluBackward(_GradKernel):
    """g * (out > 0) as one op."""

    name = "relu_backward"

    def forward(self, g, out):
        return np.multiply(g, out > 0)


class Silu(Unary):
    name = "silu"

    def saved(self, x, out):
        return (X0_ACT,)

    @staticmethod
    def fn(x):
        return x * _sigmoid(x)

    def backward(self, g):
        (x,) = self.saved_tensors
        s = sigmoid(x)
        return (g * s * (1.0 + x * (1.0 - s)),)


class Softplus(Unary):
    name = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        self.beta, self.threshold = beta, threshold

    def saved(self, x, out):
        return (X0_ACT,)

    def fn(self, x):
        bx = x * self.beta
        soft = np.logaddexp(0, bx) / self.beta
        return np.where(bx > self.threshold, x, soft).astype(x.dtype, copy=False)

    def backward(self, g):
        (x,) = self.saved_tensors
        bx = x * self.beta
        return (g * where(bx > self.threshold, 1.0, sigmoid(bx)),)


_SQRT_2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x). float64 uses math.erf exactly; other dtypes a float32 table (error < 1.5e-7)."""
    if x.dtype == np.float64:
        return 0.5 * (1.0 + _erf64(x / _SQRT_2))
    return gelu_kernels.blockwise(x, "phi")


class Gelu(Unary):
    name = "gelu"

    def __init__(self, approximate: str = "none") -> None:
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def saved(self, x, out):
        return (X0_ACT,)

    def fn(self, x):
        if self.approximate == "tanh":
            inner = np.tanh((x + 0.044715 * x * x * x) * _SQRT_2_OVER_PI)
            return (0.5 * x * (1.0 + inner)).astype(x.dtype, copy=False)
        if x.dtype == np.float64:
            return x * normal_cdf(x)
        return gelu_kernels.blockwise(x, "phi", times=x)

    def backward(self, g):
        (x,) = self.saved_tensors
        fused = self.approximate == "none" and x.dtype is _dt.float32
        if fused and not grad_mode.state.enabled:  # no grad of grad: one blockwise pass
            return (apply(GeluBackward(), g, x),)
        return (g * apply(GeluGrad(self.approximate), x),)


class GeluBackward(_GradKernel):
    """g * d gelu / dx for float32 in one blockwise pass."""

    name = "gelu_backward"

    def forward(self, g, x):
        return gelu_kernels.blockwise(x, "gelu_grad", times=g)


class GeluGrad(Unary):
    """d gelu / dx as its own primitive (so grad of grad goes through it)."""

    name = "gelu_backward"

    def __init__(self, approximate: str) -> None:
        self.approximate = approximate

    def saved(self, x, out):
        return (X0,)

    def fn(self, x):
        if self.approximate == "tanh":
            u = (x + 0.044715 * x * x * x) * _SQRT_2_OVER_PI
            th = np.tanh(u)
            du = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
            return (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du).astype(x.dtype, copy=False)
        if x.dtype == np.float64:
            pdf = np.exp(-0.5 * x * x) * _INV_SQRT_2PI
            return normal_cdf(x) + x * pdf
        return gelu_kernels.blockwise(x, "gelu_grad")

    def backward(self, g):
        (x,) = self.saved_tensors
        if self.approximate == "tanh":
            raise NotImplementedError("second derivative of tanh-GELU")
        pdf = exp(x * x * -0.5) * _INV_SQRT_2PI
        return (g * pdf * (2.0 - x * x),)


class Clamp(Op):
    name = "clamp"

    def __init__(self, lo, hi) -> None:
        self.lo, self.hi = lo, hi

    def infer(self, x):
        dt = x.dtype
        for b in (self.lo, self.hi):
            if b is not None:
                dt = result_type(x, b)
        return x.shape, dt

    def saved(self, x, out):
        return (X0,)

    def forward(self, x):
        out = np.clip(x, self.lo, self.hi)
        return out

    def backward(self, g):
        (x,) = self.saved_tensors
        keep = None
        if self.lo is not None:
            keep = x >= self.lo
        if self.hi is not None:
            upper = x <= self.hi
            keep = upper if keep is None else logical_and(keep, upper)
        return (g * keep,)


class Cast(Op):
    name = "to"

    def __init__(self, dtype: DType) -> None:
        self.dtype = dtype

    def infer(self, x):
        return x.shape, self.dtype

    def forward(self, x):
        return x.astype(self.dtype.np)

    def backward(self, g):
        return (g,)  # the engine casts the gradient back to the input's dtype


class CastToInt(Cast):
    """A cast to an integer or bool dtype: no gradient flows through it."""

    differentiable = False


# ---- binary -----------------------------------------------------------------------------
class Binary(Op):
    """Two tensors, broadcast; forward computes in the promoted dtype (`self.compute`)."""

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
        self.cast = not (a.dtype is dt and b.dtype is dt)
        return shape, dt

    def forward(self, a, b):
        if self.cast:
            npd = self.compute.np
            if a.dtype != npd:
                a = a.astype(npd)
            if b.dtype != npd:
                b = b.astype(npd)
        return self.fn(a, b)


class Add(Binary):
    name = "add"
    fn = staticmethod(np.add)

    def backward(self, g):
        return g, g


class Sub(Binary):
    name = "sub"
    fn = staticmethod(np.subtract)

    def backward(self, g):
        return g, -g


class Mul(Binary):
    name = "mul"
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

    def saved(self, a, b, out):
        self.need_b = b.requires_grad
        return (X0, X1, OUT) if b.requires_grad else (X0, X1)

    def forward(self, a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return Binary.forward(self, a, b)

    def backward(self, g):
        saved = self.saved_tensors
        a, b = saved[0], saved[1]
        ga = g * b * a ** (b - 1.0)
        gb = g * saved[2] * log(a) if self.need_b else None
        return ga, gb


class Maximum(Binary):
    name = "maximum"
    fn = staticmethod(np.maximum)

    def saved(self, a, b, out):
        return (X0, X1)

    def backward(self, g):
        a, b = self.saved_tensors
        wa = (a > b) + (a == b) * 0.5  # ties split the gradient, as PyTorch does
        return g * wa, g * (1.0 - wa)


class Minimum(Maximum):
    name = "minimum"
    fn = staticmethod(np.minimum)

    def backward(self, g):
        a, b = self.saved_tensors
        wa = (a < b) + (a == b) * 0.5
        return g * wa, g * (1.0 - wa)


class FloorDivide(Binary):
    name = "floor_divide"
    differentiable = False

    @staticmethod
    def fn(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.floor_divide(a, b)


class Remainder(Binary):
    name = "remainder"

    def saved(self, a, b, out):
        return (X0, X1) if b.requires_grad else ()

    @staticmethod
    def fn(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.remainder(a, b)

    def backward(self, g):
        if self._saved:
            a, b = self.saved_tensors
            return g, -g * floor_divide(a, b)
        return g, None


class Compare(Binary):
    """Comparisons and logical ops: bool results, no gradient."""

    differentiable = False

    def infer(self, a, b):
        shape, _ = Binary.infer(self, a, b)  # the promoted dtype the comparison runs in
        return shape, _dt.bool_


def _compare(name: str, fn) -> type:
    return type(name.capitalize(), (Compare,), {"name": name, "fn": staticmethod(fn)})


Eq, Ne = _compare("eq", np.equal), _compare("ne", np.not_equal)
Lt, Le = _compare("lt", np.less), _compare("le", np.less_equal)
Gt, Ge = _compare("gt", np.greater), _compare("ge", np.greater_equal)
LogicalAnd, LogicalOr = _compare("logical_and", np.logical_and), _compare("logical_or",
                                                                           np.logical_or)
LogicalXor = _compare("logical_xor", np.logical_xor)


class UnaryPredicate(Op):
    differentiable = False

    def infer(self, x):
        return x.shape, _dt.bool_

    def forward(self, x):
        return self.fn(x)


def _predicate(name: str, fn) -> type:
    return type(name, (UnaryPredicate,), {"name": name, "fn": staticmethod(fn)})


LogicalNot = _predicate("logical_not", np.logical_not)
IsNan, IsInf, IsFinite = (_predicate("isnan", np.isnan), _predicate("isinf", np.isinf),
                          _predicate("isfinite", np.isfinite))


class Where(Op):
    name = "where"

    def infer(self, cond, a, b):
        if cond.dtype is not _dt.bool_:
            raise DTypeError(f"where: the condition must be bool, got {cond.dtype}", op="where",
                             operands=[("condition", describe(cond))],
                             hint="compare first, e.g. where(x > 0, ...)")
        shape = broadcast_shapes(cond.shape, a.shape, "where", ("condition", "input"))
        shape = broadcast_shapes(shape, b.shape, "where", ("input", "other"))
        self.compute = promote_types(a.dtype, b.dtype)
        return shape, self.compute

    def saved(self, cond, a, b, out):
        return (X0,)

    def forward(self, cond, a, b):
        npd = self.compute.np
        return np.where(cond, _cast_np(a, npd), _cast_np(b, npd))

    def backward(self, g):
        (cond,) = self.saved_tensors
        zero = zeros_scalar_like(g)
        return None, where(cond, g, zero), where(cond, zero, g)


def _cast_np(arr, npd):
    return arr if arr.dtype == npd else arr.astype(npd)


# ---- tensor with a Python scalar --------------------------------------------------------
class ScalarOp(Op):
    """x (op) c for a Python number c: no broadcasting, PyTorch's scalar promotion."""

    def __init__(self, c) -> None:
        self.c = c

    def infer(self, x):
        self.dt = self.out_dtype(scalar_result_type(x.dtype, self.c))
        return x.shape, self.dt

    def out_dtype(self, dt: DType) -> DType:
        return dt

    def forward(self, x):
        npd = self.dt.np
        if x.dtype != npd:
            x = x.astype(npd)
        return self.fn(x, self.c)


def scalar_result_type(dt: DType, c) -> DType:
    """A tensor of dtype dt with a Python number: the number widens only across categories."""
    tc = type(c)
    if tc is float:
        return dt if dt.category == 2 else _dt.default_float
    if tc is int:
        return dt if dt.category >= 1 else _dt.default_int
    if tc is bool:
        return dt
    return promote_types(dt, result_type(c))


def _quiet(fn):
    """A NumPy function with division and overflow warnings off (PyTorch gives inf/nan)."""

    def quiet(*args):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(*args)

    return staticmethod(quiet)


class AddScalar(ScalarOp):
    name = "add"
    fn = staticmethod(np.add)

    def backward(self, g):
        return (g,)


class RSubScalar(ScalarOp):
    name = "rsub"
    fn = staticmethod(lambda x, c: np.subtract(c, x))

    def backward(self, g):
        return (-g,)


class MulScalar(ScalarOp):
    name = "mul"
    fn = staticmethod(np.multiply)

    def backward(self, g):
        return (g * self.c,)


class _FloatScalar(ScalarOp):
    def out_dtype(self, dt):
        return dt if dt.is_floating_point else _dt.default_float


class DivScalar(_FloatScalar):
    name = "div"
    fn = _quiet(np.true_divide)

    def backward(self, g):
        return (g / self.c,)


class RDivScalar(_FloatScalar):
    name = "rdiv"
    fn = _quiet(lambda x, c: np.true_divide(c, x))

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        return (g * (-self.c) / (x * x),)


class PowScalar(ScalarOp):
    name = "pow"
    fn = _quiet(np.power)

    def saved(self, x, out):
        return (X0,)

    def backward(self, g):
        (x,) = self.saved_tensors
        c = self.c
        if c == 0:
            return (g * 0.0,)
        if c == 2:
            return (g * x * 2.0,)
        return (g * (x ** (c - 1)) * c,)


class RPowScalar(_FloatScalar):
    name = "rpow"
    fn = _quiet(lambda x, c: np.power(c, x))

    def out_dtype(self, dt):
        return dt

    def saved(self, x, out):
        return (OUT,)

    def backward(self, g):
        (out,) = self.saved_tensors
        return (g * out * math.log(self.c),)


class FloorDivScalar(ScalarOp):
    name = "floor_divide"
    differentiable = False
    fn = _quiet(np.floor_divide)


class RFloorDivScalar(ScalarOp):
    name = "floor_divide"
    differentiable = False
    fn = _quiet(lambda x, c: np.floor_divide(c, x))


class RemainderScalar(ScalarOp):
    name = "remainder"
    fn = _quiet(np.remainder)

    def backward(self, g):
        return (g,)


class RRemainderScalar(ScalarOp):
    name = "remainder"
    differentiable = False
    fn = _quiet(lambda x, c: np.remainder(c, x))


class CompareScalar(ScalarOp):
    differentiable = False

    def infer(self, x):
        self.dt = scalar_result_type(x.dtype, self.c)  # raises for a non-number
        return x.shape, _dt.bool_

    def forward(self, x):
        return self.fn(x, self.c)


def _compare_scalar(name: str, fn) -> type:
    return type(name + "_scalar", (CompareScalar,), {"name": name, "fn": staticmethod(fn)})


_SCALAR_COMPARE = {
    "eq": _compare_scalar("eq", np.equal), "ne": _compare_scalar("ne", np.not_equal),
    "lt": _compare_scalar("lt", np.less), "le": _compare_scalar("le", np.less_equal),
    "gt": _compare_scalar("gt", np.greater), "ge": _compare_scalar("ge", np.greater_equal),
}
_TENSOR_COMPARE = {"eq": Eq, "ne": Ne, "lt": Lt, "le": Le, "gt": Gt, "ge": Ge}
_FLIP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


# ---- functional API ---------------------------------------------------------------------
_NUMBER = (int, float, bool)


def _scalar_tensor(c, like: Tensor) -> Tensor:
    """A Python number as a 0-d tensor on `like`'s device (for ops with no scalar form)."""
    dt = result_type(c)
    if like.device is meta:
        return Tensor._make(None, (), dt, meta)
    return Tensor._make(np.asarray(c, dtype=dt.np), (), dt, like.device)


def _as_operand(x, other: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (*_NUMBER, np.generic)):
        return _scalar_tensor(x.item() if isinstance(x, np.generic) else x, other)
    if isinstance(x, np.ndarray):
        from ..tensor import from_numpy

        return from_numpy(x)
    raise DTypeError(f"expected a tensor or a number, got {type(x).__name__}")


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
        return apply(AddScalar(-b), a)
    return _binary(Sub, None, RSubScalar, a, b)


def rsub(a, b) -> Tensor:
    return sub(b, a)


def mul(a, b) -> Tensor:
    return _binary(Mul, MulScalar, MulScalar, a, b)


def div(a, b, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode == "floor":
        return floor_divide(a, b)
    if rounding_mode == "trunc":
        return trunc(div(a, b))
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


fmod = remainder


def maximum(a: Tensor, b: Tensor) -> Tensor:
    return apply(Maximum(), _as_operand(a, b if isinstance(b, Tensor) else None),
                 _as_operand(b, a if isinstance(a, Tensor) else None))


def minimum(a: Tensor, b: Tensor) -> Tensor:
    return apply(Minimum(), _as_operand(a, b if isinstance(b, Tensor) else None),
                 _as_operand(b, a if isinstance(a, Tensor) else None))


def _comparison(name: str, a, b) -> Tensor:
    if isinstance(a, Tensor):
        if isinstance(b, _NUMBER):
            return apply(_SCALAR_COMPARE[name](b), a)
        return apply(_TENSOR_COMPARE[name](), a, _as_operand(b, a))
    if isinstance(a, _NUMBER) and isinstance(b, Tensor):
        return apply(_SCALAR_COMPARE[_FLIP[name]](a), b)
    return apply(_TENSOR_COMPARE[name](), _as_operand(a, b), _as_operand(b, a))


def eq(a, b) -> Tensor:
    return _comparison("eq", a, b)


def ne(a, b) -> Tensor:
    return _comparison("ne", a, b)


def lt(a, b) -> Tensor:
    return _comparison("lt", a, b)


def le(a, b) -> Tensor:
    return _comparison("le", a, b)


def gt(a, b) -> Tensor:
    return _comparison("gt", a, b)


def ge(a, b) -> Tensor:
    return _comparison("ge", a, b)


greater, greater_equal, less, less_equal, equal_elementwise = gt, ge, lt, le, eq
not_equal = ne


def logical_and(a, b) -> Tensor:
    return apply(LogicalAnd(), _as_operand(a), _as_operand(b, a))


def logical_or(a, b) -> Tensor:
    return apply(LogicalOr(), _as_operand(a), _as_operand(b, a))


def logical_xor(a, b) -> Tensor:
    return apply(LogicalXor(), _as_operand(a), _as_operand(b, a))


def logical_not(x: Tensor) -> Tensor:
    return apply(LogicalNot(), x)


def isnan(x: Tensor) -> Tensor:
    return apply(IsNan(), x)


def isinf(x: Tensor) -> Tensor:
    return apply(IsInf(), x)


def isfinite(x: Tensor) -> Tensor:
    return apply(IsFinite(), x)


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
    if like.device is meta:
        return Tensor._make(None, (), dt, meta)
    return Tensor._make(np.asarray(c, dtype=dt.np), (), dt, like.device)


def zeros_scalar_like(g: Tensor) -> Tensor:
    return _typed_scalar(0, g)


def neg(x: Tensor) -> Tensor:
    return apply(Neg(), x)


negative = neg


def abs(x: Tensor) -> Tensor:  # noqa: A001
    return apply(Abs(), x)


def sign(x: Tensor) -> Tensor:
    return apply(Sign(), x)


def exp(x: Tensor) -> Tensor:
    return apply(Exp(), x)


def log(x: Tensor) -> Tensor:
    return apply(Log(), x)


def log1p(x: Tensor) -> Tensor:
    return apply(Log1p(), x)


def expm1(x: Tensor) -> Tensor:
    return apply(Expm1(), x)


def sqrt(x: Tensor) -> Tensor:
    return apply(Sqrt(), x)


def rsqrt(x: Tensor) -> Tensor:
    return apply(Rsqrt(), x)


def sin(x: Tensor) -> Tensor:
    return apply(Sin(), x)


def cos(x: Tensor) -> Tensor:
    return apply(Cos(), x)


def tanh(x: Tensor) -> Tensor:
    return apply(Tanh(), x)


def sigmoid(x: Tensor) -> Tensor:
    return apply(Sigmoid(), x)


def relu(x: Tensor) -> Tensor:
    return apply(Relu(), x)


def silu(x: Tensor) -> Tensor:
    return apply(Silu(), x)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return apply(Gelu(approximate), x)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return apply(Softplus(beta, threshold), x)


def square(x: Tensor) -> Tensor:
    return apply(PowScalar(2), x)


def reciprocal(x: Tensor) -> Tensor:
    return apply(RDivScalar(1.0), x)


def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = x
        if min is not None:
            out = maximum(out, min)
        if max is not None:
            out = minimum(out, max)
        return out
    return apply(Clamp(min, max), x)


clip = clamp


class _Rounding(Op):
    differentiable = True

    def infer(self, x):
        return x.shape, x.dtype

    def forward(self, x):
        return self.fn(x)

    def backward(self, g):
        return (g * 0.0,)


Floor = type("Floor", (_Rounding,), {"name": "floor", "fn": staticmethod(np.floor)})
Ceil = type("Ceil", (_Rounding,), {"name": "ceil", "fn": staticmethod(np.ceil)})
Round = type("Round", (_Rounding,), {"name": "round", "fn": staticmethod(np.round)})
Trunc = type("Trunc", (_Rounding,), {"name": "trunc", "fn": staticmethod(np.trunc)})


def floor(x: Tensor) -> Tensor:
    return apply(Floor(), x)


def ceil(x: Tensor) -> Tensor:
    return apply(Ceil(), x)


def round(x: Tensor) -> Tensor:  # noqa: A001
    return apply(Round(), x)


def trunc(x: Tensor) -> Tensor:
    return apply(Trunc(), x)


def cast(x: Tensor, dtype) -> Tensor:
    dt = _dt.get_dtype(dtype)
    return apply((Cast if dt.is_floating_point else CastToInt)(dt), x)


def to_device(x: Tensor, device: Device) -> Tensor:
    """Move to another device. A new leaf that keeps requires_grad (as moving a parameter)."""
    if device is cpu and x.device is meta:
        raise DeviceError(
            f"cannot move a meta tensor {describe(x)} to cpu: it has no data",
            op="to", hint="create the tensor on cpu, or initialise parameters after moving",
        )
    data = None if device is meta else x.data
    out = Tensor._make(data, x.shape, x.dtype, device)
    out.requires_grad = x.requires_grad and x.grad_fn is None
    return out


METHODS = (
    "neg", "negative", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin",
    "cos", "tanh", "sigmoid", "relu", "silu", "softplus", "square", "reciprocal", "clamp", "clip",
    "floor", "ceil", "round", "trunc", "maximum", "minimum", "add", "sub", "mul", "div",
    "true_divide", "pow", "floor_divide", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite",
    "multiply", "subtract", "divide", "greater", "less", "greater_equal", "less_equal",
)

__all__ = [*METHODS, "where", "gelu", "rsub", "cast"]
