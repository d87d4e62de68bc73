"""resize_ and resize_as_ (ops/movement/resize.py) against PyTorch on fresh tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf


@pytest.mark.parametrize("start,size", [((5, 5, 5), (25, 5)), ((), ()), ((), (1, 1, 1)),
                                        ((4, 3), (2, 2)), ((2, 3), (6,))])
def test_resize_keeps_the_leading_elements(start, size):
    a = np.arange(int(np.prod(start))).reshape(start).astype(np.float64)
    x, t = sf.tensor(a), torch.tensor(a)
    assert x.resize_(size) is x
    t.resize_(size)
    assert tuple(x.shape) == tuple(t.shape)
    np.testing.assert_array_equal(x.numpy(), t.numpy())


def test_resize_grows_with_zeros_and_resize_as_():
    x = sf.tensor([1, 2, 3])
    x.resize_(2, 3)
    assert x.tolist() == [[1, 2, 3], [0, 0, 0]]  # PyTorch leaves these uninitialised
    y = sf.resize_as_(sf.tensor([1.0, 2.0, 3.0, 4.0]), sf.zeros(2, 2))
    assert y.tolist() == torch.resize_as_(torch.tensor([1.0, 2.0, 3.0, 4.0]),
                                          torch.zeros(2, 2)).tolist()
    m = sf.zeros(3, device="meta")
    assert tuple(m.resize_(4, 5).shape) == (4, 5)


def test_resize_refuses_tensors_that_require_grad():
    with pytest.raises(sf.GraphError, match="requires grad"):
        sf.zeros(2, requires_grad=True).resize_(3)
    with pytest.raises(sf.ShapeError, match="non-negative"):
        sf.zeros(2).resize_(-1)
