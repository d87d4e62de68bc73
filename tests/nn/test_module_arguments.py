"""A module option out of range raises shapeflow's ArgumentValueError: a ShapeflowError, and a
ValueError as PyTorch's is, so ported `except ValueError` clauses keep working."""

from __future__ import annotations

import pytest

import shapeflow as sf
from shapeflow.errors import ArgumentValueError, ShapeflowError

BAD = {
    "Hardtanh": lambda: sf.nn.Hardtanh(1.0, -1.0),
    "Bilinear": lambda: sf.nn.Bilinear(0, 2, 3),
    "FractionalMaxPool2d": lambda: sf.nn.FractionalMaxPool2d(2),
    "FractionalMaxPool2d ratio": lambda: sf.nn.FractionalMaxPool2d(2, output_ratio=1.5),
    "GroupNorm": lambda: sf.nn.GroupNorm(3, 4),
    "RNN nonlinearity": lambda: sf.nn.RNN(4, 4, nonlinearity="sigmoid"),
    "LSTM dropout": lambda: sf.nn.LSTM(4, 4, dropout=2.0),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_module_options_raise_shapeflows_value_error(name):
    with pytest.raises(ArgumentValueError) as info:
        BAD[name]()
    assert isinstance(info.value, ShapeflowError) and isinstance(info.value, ValueError)
