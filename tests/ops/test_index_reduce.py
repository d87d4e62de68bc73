"""index_reduce (ops/index/scatter_reduce.py) and inner (ops/linalg/products.py) against
PyTorch: values, gradients (prod, mean, amax, amin; include_self), meta, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce(reduce, include_self, dim):
    x = RNG.standard_normal((4, 5))
    n = 6
    index = RNG.integers(0, x.shape[dim], n)
    src_shape = list(x.shape)
    src_shape[dim] = n
    check_op(lambda a, s: sf.index_reduce(a, dim, sf.tensor(index), s, reduce,
                                          include_self=include_self),
             lambda a, s: torch.index_reduce(a, dim, torch.tensor(index), s, reduce,
                                             include_self=include_self),
             x, RNG.standard_normal(src_shape), meta=False, gradcheck=reduce != "prod")


def test_index_reduce_integers_method_and_errors():
    x = sf.tensor([[1, 2], [3, 4], [5, 6]])
    src = sf.tensor([[2, 2], [3, 3]])
    out = x.index_reduce(0, sf.tensor([0, 0]), src, "prod")
    ref = torch.tensor([[1, 2], [3, 4], [5, 6]]).index_reduce(
        0, torch.tensor([0, 0]), torch.tensor([[2, 2], [3, 3]]), "prod")
    assert out.dtype is sf.int64 and out.tolist() == ref.tolist()
    y = sf.zeros(3, 2)
    y.index_reduce_(0, sf.tensor([1]), sf.ones(1, 2) * 5, "amax")
    assert y.tolist() == [[0, 0], [5, 5], [0, 0]]
    with pytest.raises(sf.ShapeError, match="reduce argument"):
        sf.index_reduce(x, 0, sf.tensor([0]), src[:1], "sum")
    with pytest.raises(sf.ShapeError, match="source must have"):
        sf.index_reduce(x, 0, sf.tensor([0, 1]), sf.zeros(2, 3, dtype=sf.int64), "amax")


@pytest.mark.parametrize("a,b", [((5,), (5,)), ((), (5, 5)), ((3, 4), (2, 4)),
                                 ((2, 3, 4), (4,))])
def test_inner(a, b):
    check_op(sf.inner, torch.inner, RNG.standard_normal(a), RNG.standard_normal(b))
    ints = sf.inner(sf.tensor(RNG.integers(0, 5, a)), sf.tensor(RNG.integers(0, 5, b)))
    assert ints.dtype is sf.int64


def test_inner_error():
    with pytest.raises(sf.ShapeError, match="last dims"):
        sf.inner(sf.zeros(3), sf.zeros(4))


def test_index_reduce_on_meta():
    m = sf.zeros(4, 5, device="meta", requires_grad=True)
    out = sf.index_reduce(m, 0, sf.zeros(6, dtype=sf.int64, device="meta"),
                          sf.zeros(6, 5, device="meta"), "amax")
    assert tuple(out.shape) == (4, 5) and out.device == "meta"
