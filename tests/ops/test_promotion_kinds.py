"""Promotion kinds: dtypes.promote(kind, ...) gives PyTorch's result dtype for an op of each kind.

For every kind, a representative PyTorch op runs on a grid of input dtypes (tensors, 0-d
tensors and Python numbers); promote() must name the dtype PyTorch gives, and shapeflow's op
of that kind must give it too. Where PyTorch has no kernel for a dtype, the case is skipped.
"""

import itertools
import pathlib
import re

import pytest
import torch

import shapeflow as sf
from shapeflow import dtypes as _dt
from tests.ops.harness import TORCH_DTYPES

GRID = (sf.bool, sf.int32, sf.int64, sf.float16, sf.bfloat16, sf.float32, sf.float64)
NUMBERS = (True, 2, 2.5)
# ops whose own result dtype may differ from torch's (only promote() is checked for them);
# where was one until it declared NO_OPMATH (a 0-d value no longer widens a tensor)
SF_DIFFERS: set[str] = set()

# kind -> (name, arity): shapeflow's sf.<name> and torch.<name> are ops of that kind
REPRESENTATIVES = {
    _dt.DEFAULT: [("add", 2), ("neg", 1)],
    _dt.NO_OPMATH: [("where", 2)],
    _dt.INT_TO_FLOAT: [("exp", 1), ("div", 2), ("atan2", 2)],
    _dt.ALWAYS_BOOL: [("eq", 2), ("isnan", 1)],
    _dt.BOOL_TO_LONG: [("square", 1)],
    _dt.INT_TO_LONG: [("sum", 1), ("cumsum", 1)],
    _dt.COMPLEX_TO_FLOAT: [("abs", 1)],
}


def _sf_tensor(dt, zero_d=False):
    return sf.ones(() if zero_d else (3,), dtype=dt)


def _torch(x):
    if isinstance(x, sf.Tensor):
        return torch.ones(tuple(x.shape), dtype=TORCH_DTYPES[x.dtype])
    return x


def _call(lib, name, args):
    if name == "where":  # the kind is that of the two values the condition picks from
        cond = lib.ones(3, dtype=lib.bool) if lib is torch else sf.ones((3,), dtype=sf.bool)
        return lib.where(cond, *args)
    if name == "cumsum":
        return lib.cumsum(*args, 0)
    return getattr(lib, name)(*args)


def _cases(arity):
    if arity == 1:
        for dt in GRID:
            yield (_sf_tensor(dt),)
        return
    for a, b in itertools.product(GRID, GRID):
        yield _sf_tensor(a), _sf_tensor(b)
        yield _sf_tensor(a), _sf_tensor(b, zero_d=True)  # a 0-d operand: its own tier
    for a, c in itertools.product(GRID, NUMBERS):
        yield _sf_tensor(a), c


@pytest.mark.parametrize("kind,name,arity", [
    (kind, name, arity) for kind, ops in REPRESENTATIVES.items() for name, arity in ops])
def test_promote_gives_torchs_result_dtype(kind, name, arity):
    checked = 0
    for args in _cases(arity):
        try:
            expected = _call(torch, name, [_torch(a) for a in args]).dtype
        except (RuntimeError, TypeError, NotImplementedError):
            continue  # PyTorch has no kernel for these dtypes
        promoted = _dt.promote(kind, *args)
        assert TORCH_DTYPES[promoted] == expected, (name, args, promoted, expected)
        if name not in SF_DIFFERS:
            assert _call(sf, name, list(args)).dtype is promoted, (name, args)
        checked += 1
    assert checked >= (5 if arity == 1 else 60)


def test_promote_takes_dtypes_as_tensors():
    assert _dt.promote(_dt.INT_TO_FLOAT, sf.int32) is sf.float32
    assert _dt.promote(_dt.DEFAULT, sf.int32, sf.float16) is sf.float16
    assert _dt.promote(_dt.DEFAULT, sf.int32, 2.5) is sf.float32
    assert _dt.promote(_dt.BOOL_TO_LONG, sf.bool, True) is sf.int64
    assert _dt.promote(_dt.ALWAYS_BOOL, sf.float64) is sf.bool


def test_int_to_float_follows_the_default_dtype():
    before = sf.get_default_dtype()
    try:
        sf.set_default_dtype(sf.float64)
        assert _dt.promote(_dt.INT_TO_FLOAT, sf.int32) is sf.float64
        assert sf.exp(sf.ones((2,), dtype=sf.int32)).dtype is sf.float64
    finally:
        sf.set_default_dtype(before)


def test_predicates_and_can_cast_match_torch():
    for dt in TORCH_DTYPES:
        t = TORCH_DTYPES[dt]
        assert dt.is_floating_point == t.is_floating_point
        assert dt.is_bool == (t is torch.bool)
        assert dt.is_integer == (not t.is_floating_point and t is not torch.bool)
        assert [dt.is_bool, dt.is_integer, dt.is_floating_point].count(True) == 1
    for a, b in itertools.product(GRID, GRID):
        assert _dt.can_cast(a, b) == torch.can_cast(TORCH_DTYPES[a], TORCH_DTYPES[b]), (a, b)


def test_ops_name_dtype_categories_instead_of_comparing_numbers():
    ops = pathlib.Path(sf.__file__).parent / "ops"
    found = [f"{path.relative_to(ops)}:{n}" for path in sorted(ops.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"\.category\s*(==|!=|<|>)", line)]
    assert not found, f"use is_bool / is_integer / is_floating_point or promote(): {found}"
