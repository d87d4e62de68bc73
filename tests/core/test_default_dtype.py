"""`sf.set_default_dtype` / `sf.get_default_dtype`, compared with PyTorch's."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn


@pytest.fixture
def restore_default_dtype():
    """Put both libraries back to float32 whatever the test does (the setting is global)."""
    yield
    sf.set_default_dtype(sf.float32)
    torch.set_default_dtype(torch.float32)


# the same call in shapeflow and in PyTorch, each given its own module
MAKERS = {
    "tensor of floats": lambda m: m.tensor([1.5, 0.1]),
    "tensor of ints": lambda m: m.tensor([1, 2]),
    "tensor of bools": lambda m: m.tensor([True]),
    "tensor of a float64 array": lambda m: m.tensor(np.array([1.5])),
    "zeros": lambda m: m.zeros(2),
    "ones": lambda m: m.ones(2),
    "empty": lambda m: m.empty(2),
    "full with a float": lambda m: m.full((2,), 1.5),
    "full with an int": lambda m: m.full((2,), 3),
    "rand": lambda m: m.rand(2),
    "randn": lambda m: m.randn(2),
    "randint": lambda m: m.randint(0, 5, (2,)),
    "arange of ints": lambda m: m.arange(3),
    "arange of floats": lambda m: m.arange(0.5, 3),
    "linspace": lambda m: m.linspace(0, 1, 3),
    "eye": lambda m: m.eye(2),
    "int tensor / 2": lambda m: m.tensor([1, 2]) / 2,
    "int tensor * 1.5": lambda m: m.tensor([1, 2]) * 1.5,
    "exp of an int tensor": lambda m: m.tensor([1, 2]).exp(),
    ".float()": lambda m: m.tensor([1, 2]).float(),
    "Linear weight": lambda m: m.nn.Linear(2, 3).weight,
    "Embedding weight": lambda m: m.nn.Embedding(4, 3).weight,
    "LayerNorm bias": lambda m: m.nn.LayerNorm(3).bias,
}


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


@pytest.mark.usefixtures("restore_default_dtype")
@pytest.mark.parametrize("default", ["float64", "float16", "bfloat16", "float32"])
@pytest.mark.parametrize("what", MAKERS)
def test_factories_ops_and_modules_follow_the_default_as_pytorch(what, default):
    sf.set_default_dtype(getattr(sf, default))
    torch.set_default_dtype(getattr(torch, default))
    assert sf.get_default_dtype() is getattr(sf, default)
    got, expected = MAKERS[what](sf), MAKERS[what](torch)
    assert got.dtype.name == _name(expected.dtype)


@pytest.mark.usefixtures("restore_default_dtype")
def test_values_are_kept_at_the_wider_default():
    sf.set_default_dtype(sf.float64)
    torch.set_default_dtype(torch.float64)
    got = sf.tensor([0.1, 1 / 3]).numpy()
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, torch.tensor([0.1, 1 / 3]).numpy())
    lin = nn.Linear(3, 2)
    x = sf.randn(4, 3)
    assert lin(x).dtype is sf.float64


@pytest.mark.usefixtures("restore_default_dtype")
@pytest.mark.parametrize("bad", [sf.int64, sf.int32, sf.bool, "uint8"])
def test_only_floating_dtypes_can_be_the_default(bad):
    sf.set_default_dtype(sf.float64)
    with pytest.raises(sf.DTypeError, match="floating-point") as err:
        sf.set_default_dtype(bad)
    assert isinstance(err.value, TypeError)  # as PyTorch's TypeError
    assert sf.get_default_dtype() is sf.float64  # a refused value changes nothing


def test_the_default_is_float32_and_restored():
    """Run after the tests above in the same process: the fixture put float32 back."""
    assert sf.get_default_dtype() is sf.float32
    assert sf.tensor([1.5]).dtype is sf.float32
    assert sf.get_dtype(float) is sf.float32
