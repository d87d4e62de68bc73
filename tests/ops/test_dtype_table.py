"""Input dtypes x elementwise op -> output dtype, equal to PyTorch's for every elementwise op.

Where PyTorch raises, shapeflow raises a shapeflow error too; the one deliberate exception is
PyTorch's limited-support unsigned types (uint16/32/64), which shapeflow computes with where
PyTorch has no kernel ("not implemented for 'UInt16'").
"""

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import TORCH_DTYPES

DTYPES = list(TORCH_DTYPES)
LIMITED = (sf.uint16, sf.uint32, sf.uint64)

UNARY = [
    "neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "relu", "square", "reciprocal", "floor", "ceil", "round", "trunc", "isnan",
    "isinf", "isfinite", "logical_not", "bitwise_not", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "frac", "silu", "softplus",
    "gelu", "invert",
]
BINARY = [
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
    "bitwise_right_shift", "copysign", "div_trunc", "div_floor",
]
SCALARS = [2, 2.5, True]
# shapeflow takes a Python number where PyTorch's signature wants a Tensor (TypeError there)
TENSOR_ONLY_IN_PYTORCH = ("maximum", "minimum", "logical_and", "logical_or", "logical_xor")


def _tensor(L, dt, shape=(3,)):
    arr = np.array([1, 2, 3][: shape[0]] if shape else 2).astype(dt.np)
    if L is sf:
        return sf.from_numpy(arr.copy())
    return torch.from_numpy(arr.copy()) if dt is not sf.bfloat16 else \
        torch.from_numpy(arr.astype(np.float32)).to(torch.bfloat16)


def _fn(L, name):
    import torch.nn.functional as TF

    import shapeflow.nn.functional as F

    fl = F if L is sf else TF
    if name in ("silu", "softplus", "gelu", "relu"):
        return getattr(fl, name)
    if name == "invert":
        return lambda x: ~x
    if name.startswith("div_"):
        return lambda a, b: L.div(a, b, rounding_mode=name[4:])
    return getattr(L, name)


def _outcome(fn, *args):
    try:
        out = fn(*args)
    except Exception as e:  # noqa: BLE001  (the class is what is compared)
        return e
    return out.dtype


def _compare(name, sf_out, t_out, dtypes):
    if isinstance(t_out, Exception):
        if isinstance(sf_out, Exception):
            assert isinstance(sf_out, sf.ShapeflowError), (name, dtypes, sf_out)
            return
        # shapeflow computes where PyTorch's limited-support uints have no kernel
        assert any(d in LIMITED for d in dtypes) and isinstance(t_out, NotImplementedError), \
            (name, dtypes, "PyTorch raised", t_out, "shapeflow gave", sf_out)
        return
    assert not isinstance(sf_out, Exception), (name, dtypes, sf_out)
    assert TORCH_DTYPES[sf_out] == t_out, (name, dtypes, sf_out, t_out)


@pytest.mark.parametrize("name", UNARY)
def test_unary_dtype_table(name):
    for dt in DTYPES:
        s = _outcome(_fn(sf, name), _tensor(sf, dt))
        t = _outcome(_fn(torch, name), _tensor(torch, dt))
        _compare(name, s, t, (dt,))


@pytest.mark.parametrize("name", BINARY)
def test_binary_dtype_table(name):
    for da in DTYPES:
        for db in DTYPES:
            for shape_b in ((3,), ()):  # a 0-d operand takes part in promotion by its category
                s = _outcome(_fn(sf, name), _tensor(sf, da), _tensor(sf, db, shape_b))
                t = _outcome(_fn(torch, name), _tensor(torch, da), _tensor(torch, db, shape_b))
                _compare(name, s, t, (da, db, shape_b))


@pytest.mark.parametrize("name", BINARY)
def test_scalar_dtype_table(name):
    if name in TENSOR_ONLY_IN_PYTORCH:
        with pytest.raises(TypeError):
            _fn(torch, name)(torch.ones(2), 2)
        assert _fn(sf, name)(sf.ones(2), 2).shape == (2,)
        return
    for dt in DTYPES:
        for c in SCALARS:
            s = _outcome(lambda x, c=c: _fn(sf, name)(x, c), _tensor(sf, dt))
            t = _outcome(lambda x, c=c: _fn(torch, name)(x, c), _tensor(torch, dt))
            _compare(name, s, t, (dt, type(c)))
