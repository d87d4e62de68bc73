"""The catalogue of bad inputs (bad_inputs.py), each run in PyTorch and in shapeflow.

Where PyTorch raises, shapeflow must raise a ShapeflowError (whether its builtin kind matches
PyTorch's is recorded as a property, not asserted: issue 23 aligns the kinds). Where PyTorch
returns a value, shapeflow must return the same value.
"""

from __future__ import annotations

import pytest

from .bad_inputs import CASES, classify

pytest.importorskip("torch")

# Cases not fixed here, each with why (strict: a fix makes them fail until the mark goes).
KNOWN = {
    "m.ones(3)[..., ...]":
        "PyTorch 2.13 accepts several ellipses (all but one expand to nothing); shapeflow "
        "follows NumPy and refuses",
    "nn.Linear(3, 4).register_parameter('a.b', None)":
        "a KeyError as PyTorch's: no ShapeflowError subclasses KeyError (issue 23's classes)",
    "nn.Linear(3, 4).register_buffer('', m.ones(1))":
        "a KeyError as PyTorch's: no ShapeflowError subclasses KeyError (issue 23's classes)",
    "nn.Linear(3, 4).get_submodule('foo')":
        "an AttributeError as PyTorch's: getattr's protocol needs it, and no ShapeflowError "
        "subclasses AttributeError",
    "data.TensorDataset(m.arange(6).float().reshape(3, 2), m.arange(3))[5]":
        "an IndexError: Python's iteration protocol over __getitem__ needs it, and no "
        "ShapeflowError subclasses IndexError yet (issue 23)",
    "data.Subset(data.TensorDataset(m.arange(6).float().reshape(3, 2), m.arange(3)), [7])[0]":
        "an IndexError: Python's iteration protocol over __getitem__ needs it, and no "
        "ShapeflowError subclasses IndexError yet (issue 23)",
}


def _param(group: str, code: str):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[code])] if code in KNOWN else []
    return pytest.param(code, id=f"{group}: {code.replace(chr(10), '; ')}", marks=marks)


def test_the_catalogue_is_large_and_unique():
    codes = [code for _, code in CASES]
    assert len(codes) >= 150 and len(set(codes)) == len(codes)
    assert set(KNOWN) <= set(codes)


@pytest.mark.parametrize("code", [_param(g, c) for g, c in CASES])
def test_bad_input_is_handled_as_pytorch_does(code, record_property):
    outcome, detail = classify(code)
    record_property("outcome", outcome)
    record_property("detail", detail)
    assert outcome in ("right", "same"), f"{outcome}: {detail}"
