"""frexp, ldexp, nextafter, heaviside (ops/elementwise/float_parts.py) and gcd, lcm
(ops/elementwise/divisors.py) against PyTorch: values, dtypes, gradients, meta, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op

RNG = np.random.default_rng(0)
SPECIAL = np.array([0.0, -0.0, 1.5, -3.0, 1e-310, 7e30, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_frexp_matches_torch(dtype):
    x = np.concatenate([SPECIAL, RNG.standard_normal(20) * 100]).astype(dtype)
    m, e = sf.frexp(sf.tensor(x))
    tm, te = torch.frexp(torch.tensor(x))
    assert m.dtype is getattr(sf, dtype) and e.dtype is sf.int32
    np.testing.assert_array_equal(e.numpy(), te.numpy())
    np.testing.assert_array_equal(m.numpy(), tm.numpy())


def test_frexp_gradient_and_meta():
    check_op(lambda x: sf.frexp(x).mantissa, lambda x: torch.frexp(x).mantissa,
             RNG.standard_normal((3, 4)) * 10)


def test_frexp_refuses_integers():
    with pytest.raises(sf.DTypeError, match="floating-point"):
        sf.frexp(sf.tensor([1, 2]))


def test_ldexp():
    check_op(sf.ldexp, torch.ldexp, RNG.standard_normal((3, 4)), RNG.integers(0, 4, (4,)))
    check_op(sf.ldexp, torch.ldexp, RNG.standard_normal((3, 4)), RNG.standard_normal(4))
    # PyTorch's gradient is 0 for a negative integer exponent (its backward takes the integer
    # power 2 ** -k = 0); shapeflow's is 2 ** -k, which finite differences confirm
    x = sf.tensor(RNG.standard_normal(4), requires_grad=True)
    assert sf.autograd.gradcheck(lambda t: sf.ldexp(t, sf.tensor([-3, -1, 0, 2])), [x])
    a, b = sf.ldexp(sf.tensor([1, 2]), sf.tensor([3, 4])), torch.ldexp(torch.tensor([1, 2]),
                                                                         torch.tensor([3, 4]))
    assert a.dtype is sf.float32 and a.tolist() == b.tolist()


def test_nextafter_values_gradient_and_dtype_rule():
    a = np.array([1.0, 2.0, 0.0, -1.0, np.inf])
    b = np.array([2.0, 1.0, 1.0, -np.inf, 0.0])
    for dt in ("float32", "float64"):
        out = sf.nextafter(sf.tensor(a.astype(dt)), sf.tensor(b.astype(dt)))
        ref = torch.nextafter(torch.tensor(a.astype(dt)), torch.tensor(b.astype(dt)))
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    x = sf.tensor([1.0, 2.0], dtype=sf.float64, requires_grad=True)
    y = sf.tensor([2.0, 1.0], dtype=sf.float64, requires_grad=True)
    sf.nextafter(x, y).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]  # PyTorch passes the gradient to input only
    assert y.grad is None or y.grad.tolist() == [0.0, 0.0]
    with pytest.raises(sf.DTypeError, match="nextafter"):
        sf.nextafter(sf.tensor([1]), sf.tensor([2]))


@pytest.mark.parametrize("dtype", ["float64", "int64", "bool"])
def test_heaviside(dtype):
    x = np.array([-2, 0, 3, 0, 1]).astype(dtype)
    v = np.array([5, 7, 9, 1, 0]).astype(dtype)
    out = sf.heaviside(sf.tensor(x), sf.tensor(v))
    ref = torch.heaviside(torch.tensor(x), torch.tensor(v))
    assert out.dtype is getattr(sf, dtype) if dtype != "bool" else sf.bool
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    nan = sf.heaviside(sf.tensor([np.nan, -1.0]), sf.tensor([0.5]))
    assert np.isnan(nan.numpy()[0]) and nan.numpy()[1] == 0


def test_heaviside_refuses_mixed_dtypes():
    with pytest.raises(sf.DTypeError, match="different dtypes"):
        sf.heaviside(sf.tensor([1.0]), sf.tensor([1]))


@pytest.mark.parametrize("fn", ["gcd", "lcm"])
def test_gcd_lcm(fn):
    a = RNG.integers(-30, 30, (4, 5))
    b = RNG.integers(-30, 30, (5,))
    out = getattr(sf, fn)(sf.tensor(a), sf.tensor(b))
    ref = getattr(torch, fn)(torch.tensor(a), torch.tensor(b))
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    assert out.dtype is sf.int64
    assert getattr(sf, fn)(sf.tensor([0]), sf.tensor([0])).tolist() == [0]
    assert getattr(sf.tensor(a), fn)(sf.tensor(b)).tolist() == out.tolist()  # the method
    with pytest.raises(sf.DTypeError, match="not implemented for float32"):
        getattr(sf, fn)(sf.tensor([1.0]), sf.tensor([2.0]))


def test_meta_shapes():
    x = sf.zeros(2, 3, device="meta")
    m, e = sf.frexp(x)
    assert tuple(m.shape) == (2, 3) and e.dtype is sf.int32 and e._data is None
    assert tuple(sf.nextafter(x, x).shape) == (2, 3)
    assert tuple(sf.gcd(x.long(), sf.zeros(3, dtype=sf.int64, device="meta")).shape) == (2, 3)
    assert sf.heaviside(x, x).device == "meta"
