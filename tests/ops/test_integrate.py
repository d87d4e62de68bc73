"""trapezoid, trapz, cumulative_trapezoid (ops/reduce/integrate.py) and gradient
(ops/reduce/gradient.py) against PyTorch: values, dtypes, gradients, meta."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("name", ["trapezoid", "trapz", "cumulative_trapezoid"])
@pytest.mark.parametrize("x_shape,dim", [(None, -1), ((2, 3), 1), ((3,), -1), ((2, 3), 0)])
def test_trapezoid_with_samples(name, x_shape, dim):
    y = RNG.standard_normal((2, 3))
    if x_shape is None:
        check_op(lambda t: getattr(sf, name)(t, dim=dim),
                 lambda t: getattr(torch, name)(t, dim=dim), y)
        return
    x = np.cumsum(RNG.random(x_shape) + 0.1, axis=-1 if dim != 0 or len(x_shape) == 1 else 0)
    if len(x_shape) == 1 and dim == 0:
        return
    check_op(lambda t, u: getattr(sf, name)(t, u, dim=dim),
             lambda t, u: getattr(torch, name)(t, u, dim=dim), y, x)


@pytest.mark.parametrize("name", ["trapezoid", "cumulative_trapezoid"])
def test_trapezoid_spacing_ints_and_empty(name):
    y = RNG.standard_normal((4, 6))
    check_op(lambda t: getattr(sf, name)(t, dx=0.5), lambda t: getattr(torch, name)(t, dx=0.5),
             y)
    ints = getattr(sf, name)(sf.tensor([1, 2, 3]))
    ref = getattr(torch, name)(torch.tensor([1, 2, 3]))
    assert ints.dtype is sf.float32 and ints.tolist() == ref.tolist()
    empty = getattr(sf, name)(sf.zeros(3, 0))
    assert tuple(empty.shape) == tuple(getattr(torch, name)(torch.zeros(3, 0)).shape)
    with pytest.raises(sf.ShapeError, match="one `x` value"):
        getattr(sf, name)(sf.zeros(4), sf.zeros(3))


@pytest.mark.parametrize("kw", [{}, {"spacing": 2.0}, {"spacing": [2.0, 2.1]},
                                {"edge_order": 2}, {"dim": 1, "edge_order": 2},
                                {"dim": [0], "spacing": [0.5]}])
def test_gradient(kw):
    check_op(lambda t: sf.gradient(t, **kw), lambda t: torch.gradient(t, **kw),
             RNG.standard_normal((5, 6)))


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_with_coordinates(edge_order):
    c0, c1 = np.array([0.0, 1.0, 3.0]), np.array([0.0, 1.0, 3.0, 4.0, 4.5])
    a = RNG.standard_normal((3, 5))
    out = sf.gradient(sf.tensor(a), spacing=(sf.tensor(c0), sf.tensor(c1)),
                      edge_order=edge_order)
    ref = torch.gradient(torch.tensor(a), spacing=(torch.tensor(c0), torch.tensor(c1)),
                         edge_order=edge_order)
    for o, r in zip(out, ref):
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-12, atol=1e-12)


def test_gradient_dtype_and_errors():
    out = sf.gradient(sf.tensor([1, 2, 4, 8]))[0]
    assert out.dtype is sf.float32
    assert out.tolist() == torch.gradient(torch.tensor([1, 2, 4, 8]))[0].tolist()
    with pytest.raises(sf.ShapeError, match="edge_order"):
        sf.gradient(sf.tensor([1.0, 2.0]), edge_order=2)
    with pytest.raises(sf.ShapeError, match="list of length"):
        sf.gradient(sf.zeros(3, 3), spacing=[1.0])
