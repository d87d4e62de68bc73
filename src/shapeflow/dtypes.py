"""Data types and PyTorch's type-promotion rules.

Promotion table (`promote_types`), as in PyTorch:

| a \\ b     | bool   | uint8 | int8  | int16..int64 | float16 | bfloat16 | float32+ |
|-----------|--------|-------|-------|--------------|---------|----------|----------|
| bool      | bool   | uint8 | int8  | b            | float16 | bfloat16 | b        |
| uint8     | uint8  | uint8 | int16 | b            | float16 | bfloat16 | b        |
| int8      | int8   | int16 | int8  | b            | float16 | bfloat16 | b        |
| float16   | float16| ...   |       |              | float16 | float32  | b        |

Integers with floats give the float; two floats give the wider one, except
float16 with bfloat16, which gives float32. Complex is the highest category: anything with
complex gives complex, of the wider of the two real widths (complex64 with float64 gives
complex128); a complex Python scalar is the default complex dtype (complex64 with float32).
uint16, uint32 and uint64 (PyTorch's limited-support types) promote only with themselves and
with floats; anything else raises.
`result_type` adds PyTorch's tiers:
a Python scalar (or a 0-d tensor) never widens a tensor of the same category,
and an int tensor with a float scalar gives the default float dtype (float32).
An op's result dtype is that promoted dtype moved by its promotion kind (`promote`).
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np

from .errors import DTypeError

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class DType:
    """A tensor element type: a name, its NumPy dtype and its promotion category.

    `is_bool`, `is_integer` (bool excluded, as PyTorch's is_integer_dtype),
    `is_floating_point` and `is_complex` (not floating point, as in PyTorch) name the four
    categories; they are plain attributes, set once, so that an op's infer reads them at the
    cost of `category`.
    """

    __slots__ = ("name", "np", "itemsize", "category", "signed", "short", "is_bool",
                 "is_integer", "is_floating_point", "is_complex")

    def __init__(self, name: str, np_dtype, category: int, signed: bool, short: str) -> None:
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.category = category
        self.signed = signed
        self.short = short
        self.is_bool = category == _BOOL
        self.is_integer = category == _INT
        self.is_floating_point = category == _FLOAT
        self.is_complex = category == _COMPLEX

    @property
    def is_signed(self) -> bool:
        return self.signed

    def __repr__(self) -> str:
        return f"shapeflow.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        return (get_dtype, (self.name,))


float64 = DType("float64", np.float64, _FLOAT, True, "f64")
float32 = DType("float32", np.float32, _FLOAT, True, "f32")
float16 = DType("float16", np.float16, _FLOAT, True, "f16")
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, _FLOAT, True, "bf16")
int64 = DType("int64", np.int64, _INT, True, "i64")
int32 = DType("int32", np.int32, _INT, True, "i32")
int16 = DType("int16", np.int16, _INT, True, "i16")
int8 = DType("int8", np.int8, _INT, True, "i8")
uint8 = DType("uint8", np.uint8, _INT, False, "u8")
# PyTorch's "limited support" unsigned types: they promote only with themselves and floats
uint16 = DType("uint16", np.uint16, _INT, False, "u16")
uint32 = DType("uint32", np.uint32, _INT, False, "u32")
uint64 = DType("uint64", np.uint64, _INT, False, "u64")
bool_ = DType("bool", np.bool_, _BOOL, False, "bool")
# complex: pairs of float32 / float64 (no complex32: NumPy has no half-precision complex)
complex64 = DType("complex64", np.complex64, _COMPLEX, True, "c64")
complex128 = DType("complex128", np.complex128, _COMPLEX, True, "c128")
COMPLEX = (complex64, complex128)

ALL = (float64, float32, float16, bfloat16, int64, int32, int16, int8, uint8, uint16, uint32,
       uint64, bool_)
_LIMITED = (uint16, uint32, uint64)
FLOATS = (float64, float32, float16, bfloat16)

default_float = float32  # read as `dtypes.default_float` at each use: set_default_dtype moves it
default_int = int64

_BY_NAME = {d.name: d for d in ALL + COMPLEX}
_BY_NAME.update(
    {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
     "short": int16, "bf16": bfloat16, "fp16": float16, "fp32": float32, "fp64": float64,
     "cfloat": complex64, "cdouble": complex128}
)
_BY_NP = {d.np: d for d in ALL + COMPLEX}
# a complex dtype's real counterpart and back (16-bit floats pair with complex64, the
# narrowest complex shapeflow has)
_REAL_OF = {complex64: float32, complex128: float64}
_COMPLEX_OF = {float32: complex64, float64: complex128, float16: complex64,
               bfloat16: complex64, complex64: complex64, complex128: complex128}


def to_real(dt: DType) -> DType:
    """The real dtype of a complex one (complex64 -> float32); other dtypes unchanged."""
    return _REAL_OF.get(dt, dt)


def to_complex(dt: DType) -> DType:
    """The complex dtype holding values of dtype dt (float64 -> complex128; ints, bools and
    16-bit floats -> complex64, as shapeflow has no complex32)."""
    return _COMPLEX_OF.get(dt, complex64)


def default_complex() -> DType:
    """The complex dtype of the default float (complex64 for float32, as PyTorch's)."""
    return complex128 if default_float is float64 else complex64


def get_dtype(x) -> DType:
    """A DType from a DType, a name ('float32', 'bf16'), a NumPy dtype or a Python type."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        if x in _BY_NAME:
            return _BY_NAME[x]
        raise DTypeError(f"unknown dtype {x!r}", hint="use one of " + ", ".join(_BY_NAME))
    if x is float:
        return default_float
    if x is int:
        return default_int
    if x is bool:
        return bool_
    if x is complex:
        return default_complex()
    try:
        return _BY_NP[np.dtype(x)]
    except (TypeError, KeyError):
        raise DTypeError(f"shapeflow has no dtype for {x!r}") from None


def get_default_dtype() -> DType:
    """The dtype of floating-point tensors made without one (float32 unless set)."""
    return default_float


def set_default_dtype(d: DType | str) -> None:
    """Set the default floating-point dtype (as `torch.set_default_dtype`; process-wide)."""
    global default_float
    dt = get_dtype(d)
    if dt not in FLOATS:
        raise DTypeError(f"the default dtype must be a floating-point dtype, got {dt}",
                         hint="use float32, float64, float16 or bfloat16")
    default_float = dt


def from_numpy_dtype(np_dtype) -> DType:
    """The DType of a NumPy array's dtype; DTypeError for ones shapeflow lacks."""
    d = _BY_NP.get(np_dtype)
    if d is None:
        raise DTypeError(
            f"shapeflow has no dtype for NumPy's {np_dtype}",
            hint="supported: " + ", ".join(d.name for d in ALL + COMPLEX),
        )
    return d


def promote_types(a: DType, b: DType) -> DType:
    """The dtype two tensors of dtypes a and b combine to (PyTorch's table)."""
    if a is b:
        return a
    if a in _LIMITED or b in _LIMITED:
        if a.category == _FLOAT or b.category == _FLOAT:
            return a if a.category == _FLOAT else b
        from .errors import DTypeRuntimeError

        raise DTypeRuntimeError(
            f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
            f"{a} and {b}", hint="cast one operand with .to() first (as PyTorch requires)")
    if a.category != b.category:
        if a.category == _COMPLEX or b.category == _COMPLEX:
            return _with_complex(a, b)
        return a if a.category > b.category else b
    if a.category == _COMPLEX:
        return a if a.itemsize > b.itemsize else b
    if a.category == _FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize > b.itemsize else b
    if a.category == _INT:
        if a.signed == b.signed:
            return a if a.itemsize > b.itemsize else b
        signed, unsigned = (a, b) if a.signed else (b, a)
        return signed if signed.itemsize > unsigned.itemsize else int16
    return a


def _with_complex(a: DType, b: DType) -> DType:
    """A complex dtype with one of another category: complex, of the wider real width."""
    c, other = (a, b) if a.category == _COMPLEX else (b, a)
    if other.category == _FLOAT and other.itemsize > c.itemsize // 2:
        return complex128
    return c


def scalar_category(x) -> int:
    if isinstance(x, bool):
        return _BOOL
    if isinstance(x, int):
        return _INT
    if isinstance(x, float):
        return _FLOAT
    if isinstance(x, complex):
        return _COMPLEX
    from .torch_interop import is_torch_tensor, mixing_error

    if is_torch_tensor(x):
        raise mixing_error(x)
    raise DTypeError(f"cannot use a {type(x).__name__} as a tensor operand")


def _default_for(category: int) -> DType:
    if category == _COMPLEX:
        return default_complex()
    return (bool_, default_int, default_float)[category]


def result_type(*operands) -> DType:
    """Promote tensors (or dtypes) and Python scalars by PyTorch's tiers: tensors, 0-d
    tensors, scalars."""
    tiers: list[DType | None] = [None, None, None]
    for x in operands:
        dt = getattr(x, "dtype", x)  # a DType counts as a (dimensioned) tensor's
        if isinstance(dt, DType):
            tier = 0 if dt is x or len(x.shape) else 1
        else:
            dt, tier = _default_for(scalar_category(x)), 2
        tiers[tier] = dt if tiers[tier] is None else promote_types(tiers[tier], dt)
    result = None
    for dt in tiers:
        if dt is None:
            continue
        if result is None:
            result = dt
        elif dt.category > result.category:
            # a lower tier wins only with a higher category (scalars: the default); through
            # promote_types, which refuses PyTorch's limited uints with bool
            if dt.category == _COMPLEX and result.category == _FLOAT:
                result = _COMPLEX_OF[result]  # 1j with a float64 tensor: its width, complex128
            else:
                result = (promote_types(result, dt) if result in _LIMITED or dt in _LIMITED
                          else dt)
    return result


def can_cast(from_: DType, to: DType) -> bool:
    """Whether a value of dtype from_ may be written into a tensor of dtype to (as
    torch.can_cast): never down a category, a float into an int or a number into a bool."""
    return from_.category <= to.category


class Promotion(enum.Enum):
    """How an elementwise op's result dtype follows from its inputs' promoted dtype
    (PyTorch's ELEMENTWISE_TYPE_PROMOTION_KIND); ops declare theirs as `promotion`."""

    DEFAULT = "keep"                  # the promoted dtype (add, neg, where)
    INT_TO_FLOAT = "int to float"     # bools and ints give the default float (exp, div)
    ALWAYS_BOOL = "always bool"       # comparisons and predicates (eq, isnan)
    BOOL_TO_LONG = "bool to long"     # bool gives int64, the rest is kept (square)
    # not one of PyTorch's elementwise kinds: its reductions' rule for sum, prod, cumsum
    INT_TO_LONG = "int to long"       # bools and ints accumulate in int64
    NO_OPMATH = "keep, no opmath"     # DEFAULT's dtype, computed without float32 for halves
    COMPLEX_TO_FLOAT = "complex to float"  # abs, angle: complex gives its real dtype


DEFAULT = Promotion.DEFAULT
INT_TO_FLOAT = Promotion.INT_TO_FLOAT
ALWAYS_BOOL = Promotion.ALWAYS_BOOL
BOOL_TO_LONG = Promotion.BOOL_TO_LONG
INT_TO_LONG = Promotion.INT_TO_LONG
NO_OPMATH = Promotion.NO_OPMATH
COMPLEX_TO_FLOAT = Promotion.COMPLEX_TO_FLOAT
_KEEPING = (DEFAULT, NO_OPMATH)


def promote(kind: Promotion, *operands) -> DType:
    """The result dtype of an op of promotion `kind` on operands: dtypes (as tensors'),
    tensors and Python scalars, promoted by `result_type`'s tiers, then moved by the kind."""
    if len(operands) == 1:  # one operand (unary ops, reductions): its dtype, no tiers
        dt = getattr(operands[0], "dtype", operands[0])
        if not isinstance(dt, DType):
            dt = result_type(operands[0])
    else:
        dt = result_type(*operands)
    if kind is INT_TO_FLOAT:
        return dt if dt.category >= _FLOAT else default_float  # complex stays complex
    if kind is ALWAYS_BOOL:
        return bool_
    if kind is BOOL_TO_LONG:
        return int64 if dt.is_bool else dt
    if kind is INT_TO_LONG:
        return dt if dt.category >= _FLOAT else int64
    if kind is COMPLEX_TO_FLOAT:
        return _REAL_OF.get(dt, dt)
    if kind in _KEEPING:
        return dt
    raise DTypeError(f"unknown promotion kind {kind!r}",
                     hint="use one of " + ", ".join(k.name for k in Promotion))


def opmath(dt: DType) -> DType:
    """The dtype a kernel computes a float dtype in (PyTorch's opmath type): float32 for the
    16-bit floats, the dtype itself otherwise (NO_OPMATH ops compute in the dtype itself)."""
    return float32 if dt is float16 or dt is bfloat16 else dt
