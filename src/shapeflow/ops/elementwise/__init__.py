"""Elementwise ops: unary math, activations, binary arithmetic, comparisons, casts.

One family a module; this package re-exports them, so `ops.elementwise.X` names stay as they were.
"""

from __future__ import annotations

from .activations import (  # noqa: F401  (re-exported: importers use these)
    Gelu,
    GeluBackward,
    GeluGrad,
    Relu,
    ReluBackward,
    Sigmoid,
    Silu,
    Softplus,
    gelu,
    normal_cdf,
    relu,
    sigmoid,
    silu,
    softplus,
)
from .binary import (  # noqa: F401  (re-exported: importers use these)
    Add,
    Binary,
    Div,
    FloorDivide,
    Mul,
    Pow,
    Remainder,
    Sub,
    _tensor_operator,
    add,
    div,
    divide,
    floor_divide,
    mul,
    multiply,
    pow,
    remainder,
    rsub,
    sub,
    subtract,
    true_divide,
)
from .bounds import (  # noqa: F401  (re-exported: importers use these)
    Clamp,
    Maximum,
    Minimum,
    clamp,
    clip,
    maximum,
    minimum,
)
from .casts import (  # noqa: F401  (re-exported: importers use these)
    Cast,
    CastToInt,
    cast,
    to_device,
)
from .compare import (  # noqa: F401  (re-exported: importers use these)
    Compare,
    CompareScalar,
    Eq,
    Ge,
    Gt,
    IsFinite,
    IsInf,
    IsNan,
    Le,
    LogicalAnd,
    LogicalNot,
    LogicalOr,
    LogicalXor,
    Lt,
    Ne,
    UnaryPredicate,
    Where,
    eq,
    equal_elementwise,
    ge,
    greater,
    greater_equal,
    gt,
    isfinite,
    isinf,
    isnan,
    le,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    ne,
    not_equal,
    where,
    zeros_scalar_like,
)
from .integer import *  # noqa: F403
from .integer import (  # noqa: F401  (re-exported: importers use these)
    METHODS as _INTEGER_METHODS,
)
from .scalar import (  # noqa: F401  (re-exported: importers use these)
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
    ScalarOp,
    scalar_result_type,
)
from .trig import *  # noqa: F403
from .trig import METHODS as _TRIG_METHODS  # noqa: F401
from .unary import (  # noqa: F401  (re-exported: importers use these)
    Abs,
    Ceil,
    Cos,
    Exp,
    Expm1,
    Floor,
    Log,
    Log1p,
    Neg,
    Round,
    Rsqrt,
    Sign,
    Sin,
    Sqrt,
    Tanh,
    Trunc,
    Unary,
    abs,
    ceil,
    cos,
    exp,
    expm1,
    floor,
    log,
    log1p,
    neg,
    negative,
    reciprocal,
    round,
    rsqrt,
    sign,
    sin,
    sqrt,
    square,
    tanh,
    trunc,
)

METHODS = (
    "neg", "negative", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin",
    "cos", "tanh", "sigmoid", "relu", "silu", "softplus", "square", "reciprocal", "clamp", "clip",
    "floor", "ceil", "round", "trunc", "maximum", "minimum", "add", "sub", "mul", "div",
    "true_divide", "pow", "floor_divide", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite",
    "multiply", "subtract", "divide", "greater", "less", "greater_equal", "less_equal",
)

__all__ = [*METHODS, "where", "gelu", "rsub", "cast"]
METHODS += _INTEGER_METHODS + _TRIG_METHODS
__all__ += [*_INTEGER_METHODS, *_TRIG_METHODS]

# special functions (erf, lgamma, digamma, logit, xlogy, sinc, nan_to_num)
from . import special as _special  # noqa: E402
from .special import *  # noqa: E402, F403
from .special import digamma_, erfinv_, lgamma_  # noqa: E402, F401  (methods only)

METHODS = METHODS + _special.METHODS
__all__ += _special.__all__

# ops of two or three operands (lerp, hypot, atan2, logaddexp, fmod, addcmul, tensor clamp)
from . import mixing as _mixing  # noqa: E402
from .mixing import *  # noqa: E402, F403
from .mixing import addcdiv_, addcmul_, arctan2_, atan2_, fmod_, hypot_, lerp_  # noqa: E402, F401

METHODS = METHODS + tuple(m for m in _mixing.METHODS if m not in METHODS)
__all__ += [n for n in _mixing.__all__ if n not in __all__]

# closeness: isclose, allclose, equal
from . import closeness as _closeness  # noqa: E402
from .closeness import *  # noqa: E402, F403

METHODS = METHODS + _closeness.METHODS
__all__ += _closeness.__all__

# NumPy-style helpers: fmax, fmin, float_power, deg2rad, isin, signbit, ...
from . import numeric as _numeric  # noqa: E402
from .numeric import *  # noqa: E402, F403

METHODS = METHODS + _numeric.METHODS
__all__ += _numeric.__all__

# fill, zero_ and scalar_tensor; a float's parts (frexp, ldexp, nextafter, heaviside);
# gcd and lcm; PyTorch's complex functions on real tensors (real, conj, angle, isreal...)
from . import complex_parts as _complex_parts  # noqa: E402
from . import divisors as _divisors  # noqa: E402
from . import filling as _filling  # noqa: E402
from . import float_parts as _float_parts  # noqa: E402
from .complex_parts import *  # noqa: E402, F403
from .divisors import *  # noqa: E402, F403
from .filling import *  # noqa: E402, F403
from .float_parts import *  # noqa: E402, F403

METHODS = (METHODS + _filling.METHODS + _float_parts.METHODS + _divisors.METHODS
           + _complex_parts.METHODS)
__all__ += _filling.__all__ + _float_parts.__all__ + _divisors.__all__ + _complex_parts.__all__
