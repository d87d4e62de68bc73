"""broadcast_shapes and sum_to_size (ops/movement/broadcasting.py) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op


@pytest.mark.parametrize("shapes", [((),), ((5,), ()), ((5, 1), (5,)), (2, (3, 1)),
                                    ((1, 4), (3, 1), (2, 1, 1)), ()])
def test_broadcast_shapes(shapes):
    out = sf.broadcast_shapes(*shapes)
    assert tuple(out) == tuple(torch.broadcast_shapes(*shapes))


def test_broadcast_shapes_errors():
    with pytest.raises(sf.ShapeError):
        sf.broadcast_shapes((2, 3), (3, 2))
    with pytest.raises(sf.ShapeError, match="negative"):
        sf.broadcast_shapes((2, -1))


@pytest.mark.parametrize("shape,size", [((2, 3), (3,)), ((2, 3), (1, 3)), ((4, 1, 3), (1, 1)),
                                        ((2, 3), (2, 3)), ((5,), (1,)), ((), ())])
def test_sum_to_size(shape, size):
    check_op(lambda x: x.sum_to_size(size), lambda x: x.sum_to_size(size),
             np.random.default_rng(0).standard_normal(shape))


def test_sum_to_size_dtypes_and_errors():
    b = sf.tensor([[True, False], [True, True]])
    tb = torch.tensor([[True, False], [True, True]])
    for size in ((2,), (2, 1), (2, 2), ()):
        out, ref = b.sum_to_size(size), tb.sum_to_size(size)
        assert str(out.dtype) == str(ref.dtype).split(".")[-1] and out.tolist() == ref.tolist()
    assert b.sum_to_size(1, 2).tolist() == tb.sum_to_size(1, 2).tolist()
    with pytest.raises(sf.ShapeError, match="not expandable"):
        sf.zeros(2, 3).sum_to_size(2)
