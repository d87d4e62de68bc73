"""as_strided, select/slice/diagonal/as_strided_scatter and put (ops/index/flat_positions.py)
against PyTorch: values, gradients to input and src, meta shapes, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op

RNG = np.random.default_rng(2)


def test_as_strided():
    check_op(lambda x: sf.as_strided(x, (3, 2), (1, 2)),
             lambda x: torch.as_strided(x, (3, 2), (1, 2)), RNG.standard_normal(10))
    # overlapping windows: the gradient adds up where they overlap
    check_op(lambda x: sf.as_strided(x, (4, 3), (2, 1), 1),
             lambda x: torch.as_strided(x, (4, 3), (2, 1), 1), RNG.standard_normal(12))
    with pytest.raises(sf.ShapeError, match="out of bounds"):
        sf.as_strided(sf.zeros(4), (3,), (2,))


def test_select_scatter():
    check_op(lambda x, s: sf.select_scatter(x, s, 1, -2),
             lambda x, s: torch.select_scatter(x, s, 1, -2),
             RNG.standard_normal((3, 4, 2)), RNG.standard_normal((3, 2)))
    with pytest.raises(sf.ShapeError, match="out of range"):
        sf.select_scatter(sf.zeros(2, 3), sf.zeros(2), 1, 3)
    with pytest.raises(sf.ShapeError, match="size equal to the slice"):
        sf.select_scatter(sf.zeros(2, 3), sf.zeros(3), 1, 0)


@pytest.mark.parametrize("start,end,step", [(None, None, 1), (1, -1, 1), (0, 5, 2), (-4, 7, 3)])
def test_slice_scatter(start, end, step):
    n = len(range(*slice(start, end, step).indices(6)))
    check_op(lambda x, s: sf.slice_scatter(x, s, 1, start, end, step),
             lambda x, s: torch.slice_scatter(x, s, 1, start, end, step),
             RNG.standard_normal((2, 6)), RNG.standard_normal((2, n)))


@pytest.mark.parametrize("offset,d1,d2", [(0, 0, 1), (1, 0, 1), (-1, 1, 2), (2, -1, 0)])
def test_diagonal_scatter(offset, d1, d2):
    x = RNG.standard_normal((3, 4, 5))
    n = np.diagonal(x, offset, d1, d2).shape
    check_op(lambda x, s: sf.diagonal_scatter(x, s, offset, d1, d2),
             lambda x, s: torch.diagonal_scatter(x, s, offset, d1, d2),
             x, RNG.standard_normal(n))


def test_as_strided_scatter_values_and_gradient():
    x, s = RNG.standard_normal((3, 3)), RNG.standard_normal((2, 2))
    out = sf.as_strided_scatter(sf.tensor(x), sf.tensor(s), (2, 2), (1, 2), 1)
    ref = torch.as_strided_scatter(torch.tensor(x), torch.tensor(s), (2, 2), (1, 2), 1)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    # PyTorch's own input gradient here fails its gradcheck; finite differences are the bar
    xs, ss = (sf.tensor(a, requires_grad=True) for a in (x, s))
    assert sf.autograd.gradcheck(
        lambda a, b: sf.as_strided_scatter(a, b, (2, 2), (1, 2), 1), [xs, ss])
    with pytest.raises(sf.ShapeError, match="overlaps"):
        sf.as_strided_scatter(sf.zeros(4), sf.zeros(2, 2), (2, 2), (1, 1))


@pytest.mark.parametrize("accumulate", [False, True])
def test_put(accumulate):
    index = np.array([[0, -1], [4, 2]])
    check_op(lambda x, s: sf.put(x, sf.tensor(index), s, accumulate),
             lambda x, s: torch.put(x, torch.tensor(index), s, accumulate),
             RNG.standard_normal((2, 3)), RNG.standard_normal((2, 2)), meta=False)
    x = sf.zeros(2, 3)
    y = x.put(sf.tensor([1, 1]), sf.tensor([1.0, 2.0]), accumulate=True)
    assert y.numpy()[0, 1] == 3.0 and not x.numpy().any()
    with pytest.raises(sf.ShapeError, match="out of range"):
        sf.put(sf.zeros(2), sf.tensor([2]), sf.tensor([1.0]))
    with pytest.raises(sf.ShapeError, match="same number of elements"):
        sf.put(sf.zeros(2), sf.tensor([0, 1]), sf.tensor([1.0]))


def test_meta_shapes():
    x = sf.zeros(3, 4, device="meta", requires_grad=True)
    assert tuple(sf.select_scatter(x, sf.zeros(4, device="meta"), 0, 1).shape) == (3, 4)
    assert tuple(sf.diagonal_scatter(x, sf.zeros(3, device="meta")).shape) == (3, 4)
    out = sf.as_strided(x, (2, 2), (4, 1))
    assert tuple(out.shape) == (2, 2) and out.device == "meta"
    out.sum().backward()
    assert tuple(x.grad.shape) == (3, 4)


def test_put_in_place():
    x = sf.zeros(2, 3)
    assert x.put_(sf.tensor([1, -1]), sf.tensor([5.0, 6.0])) is x
    t = torch.zeros(2, 3).put_(torch.tensor([1, -1]), torch.tensor([5.0, 6.0]))
    assert x.tolist() == t.tolist()
