"""fill, zero_, scalar_tensor (ops/elementwise/filling.py) and PyTorch's complex functions
on real tensors (ops/elementwise/complex_parts.py) against PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import shapeflow as sf

RNG = np.random.default_rng(1)


@pytest.mark.parametrize("dtype", ["float64", "int64", "bool"])
@pytest.mark.parametrize("value", [True, 2, -1.5])
def test_fill_matches_torch(dtype, value):
    a = RNG.standard_normal((2, 3)).astype(dtype)
    out, ref = sf.fill(sf.tensor(a), value), torch.fill(torch.tensor(a), value)
    assert out.dtype is (sf.bool if dtype == "bool" else getattr(sf, dtype))
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_fill_with_a_tensor_value_gets_its_gradient():
    v = sf.tensor(2.5, dtype=sf.float64, requires_grad=True)
    tv = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    (sf.fill(sf.zeros(2, 3, dtype=sf.float64), v) * 3).sum().backward()
    (torch.fill(torch.zeros(2, 3, dtype=torch.float64), tv) * 3).sum().backward()
    assert v.grad.item() == tv.grad.item() == 18.0
    with pytest.raises(sf.ShapeError, match="0-dimension"):
        sf.fill(sf.zeros(2), sf.zeros(2))
    assert tuple(sf.fill(sf.zeros(4, 5, device="meta"), 1.0).shape) == (4, 5)


def test_scalar_tensor():
    for s, kw in ((-5, {}), (1, {"dtype": sf.int64}), (2.5, {"dtype": sf.float64})):
        tkw = {k: getattr(torch, str(v)) for k, v in kw.items()}
        out, ref = sf.scalar_tensor(s, **kw), torch.scalar_tensor(s, **tkw)
        assert out.ndim == 0 and str(out.dtype) == str(ref.dtype).split(".")[-1]
        assert out.item() == ref.item()


def test_zero_():
    x = sf.tensor([1, 2, 3])
    assert sf.zero_(x) is x and x.tolist() == [0, 0, 0]


@pytest.mark.parametrize("name", ["real", "conj", "resolve_conj", "resolve_neg"])
def test_identities_on_real_tensors(name):
    x = sf.tensor(RNG.standard_normal(4), requires_grad=True)
    assert getattr(sf, name)(x) is x


def test_conj_physical_copies_and_isreal():
    x = sf.tensor(RNG.standard_normal(4), requires_grad=True)
    y = sf.conj_physical(x)
    assert y is not x and y.tolist() == x.tolist() and y.requires_grad
    assert sf.isreal(x).tolist() == torch.isreal(torch.tensor(x.tolist())).tolist()
    assert x.isreal().dtype is sf.bool


@pytest.mark.parametrize("a", [[-1.0, 0.0, 2.0, math.nan, -0.0, -math.inf], [-1, 0, 2],
                               [True, False]])
def test_angle(a):
    out, ref = sf.angle(sf.tensor(a)), torch.angle(torch.tensor(a))
    assert str(out.dtype) == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-7)


def test_angle_gradient_is_zero_and_meta():
    x = sf.tensor([-1.0, 2.0], dtype=sf.float64, requires_grad=True)
    sf.angle(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    assert sf.angle(sf.zeros(3, dtype=sf.int64, device="meta")).dtype is sf.float32
