"""unsafe_chunk, unsafe_split (ops/movement/unsafe_splits.py), constant_pad_nd
(ops/movement/constant_pad.py) and diagflat (ops/movement/diagonals.py) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("n,dim", [(2, 0), (5, 1), (3, -1)])
def test_unsafe_chunk_and_split(n, dim):
    a = RNG.standard_normal((5, 5, 5))
    check_op(lambda x: sf.unsafe_chunk(x, n, dim), lambda x: torch.unsafe_chunk(x, n, dim), a)
    check_op(lambda x: x.unsafe_split(n, dim), lambda x: x.unsafe_split(n, dim), a)


@pytest.mark.parametrize("pad,value", [((2, 2), 0), ((1, 2), 1.5), ((0, 2, 0, 1), -1.0),
                                       ((-1, 2), 0)])
def test_constant_pad_nd(pad, value):
    check_op(lambda x: sf.constant_pad_nd(x, pad, value),
             lambda x: torch.constant_pad_nd(x, pad, value), RNG.standard_normal((1, 3, 3)))


@pytest.mark.parametrize("shape,offset", [((), 0), ((2,), 0), ((2, 2), 0), ((3,), 1),
                                          ((2, 3), -2)])
def test_diagflat(shape, offset):
    check_op(lambda x: sf.diagflat(x, offset), lambda x: torch.diagflat(x, offset),
             RNG.standard_normal(shape))
    b = sf.tensor(np.ones(shape, bool)).diagflat(offset)
    assert b.dtype is sf.bool and b.tolist() == torch.diagflat(
        torch.ones(shape, dtype=torch.bool), offset).tolist()
