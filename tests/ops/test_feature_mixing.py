"""F.bilinear and F.channel_shuffle (ops/nn/feature_mixing.py), F.threshold and F.rrelu
(ops/activation/piecewise.py, parametric.py), F.pdist, F.upsample_nearest /
upsample_bilinear against PyTorch: values, gradients, meta, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn.functional as F
from tests.ops.harness import check_op

TF = torch.nn.functional
RNG = np.random.default_rng(8)


@pytest.mark.parametrize("lead", [(), (0,), (8,), (2, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_bilinear(lead, bias):
    args = [RNG.standard_normal(lead + (4,)), RNG.standard_normal(lead + (3,)),
            RNG.standard_normal((5, 4, 3))] + ([RNG.standard_normal(5)] if bias else [])
    check_op(F.bilinear, TF.bilinear, *args, gradcheck=0 not in lead)


def test_bilinear_error():
    with pytest.raises(sf.ShapeError, match="bilinear"):
        F.bilinear(sf.zeros(2, 4), sf.zeros(2, 3), sf.zeros(5, 3, 3))


@pytest.mark.parametrize("shape,groups", [((1, 4, 3, 3), 2), ((2, 6, 5), 3), ((2, 8, 2, 2), 4)])
def test_channel_shuffle(shape, groups):
    check_op(lambda x: F.channel_shuffle(x, groups), lambda x: TF.channel_shuffle(x, groups),
             RNG.standard_normal(shape))
    b = np.arange(np.prod(shape)).reshape(shape) % 3 == 0
    assert F.channel_shuffle(sf.tensor(b), groups).tolist() == TF.channel_shuffle(
        torch.tensor(b), groups).tolist()


def test_channel_shuffle_errors():
    with pytest.raises(sf.ShapeError, match="divisible"):
        F.channel_shuffle(sf.zeros(1, 4, 2), 3)
    with pytest.raises(sf.ShapeError, match="> 2 dims"):
        F.channel_shuffle(sf.zeros(1, 6), 2)


@pytest.mark.parametrize("th,value", [(0.0, -1.0), (-0.5, 7.0), (2.0, 0.0)])
def test_threshold(th, value):
    check_op(lambda x: F.threshold(x, th, value), lambda x: TF.threshold(x, th, value),
             RNG.standard_normal((4, 5)))
    ints = RNG.integers(-3, 4, 10)
    assert F.threshold(sf.tensor(ints), th, value).tolist() == TF.threshold(
        torch.tensor(ints), th, value).tolist()


def test_rrelu():
    check_op(lambda x: F.rrelu(x, 0.1, 0.3), lambda x: TF.rrelu(x, 0.1, 0.3),
             RNG.standard_normal((4, 5)))  # eval: the mean slope
    x = sf.tensor(-np.abs(RNG.standard_normal(2000)) - 0.1, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slopes = (y / x).detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes)  # the drawn slope is the gradient
    assert F.rrelu(sf.tensor([1.0, 2.0]), training=True).tolist() == [1.0, 2.0]
    assert tuple(F.rrelu(sf.zeros(2, 3, device="meta"), training=True).shape) == (2, 3)
    with pytest.raises(sf.DTypeError, match="floating"):
        F.rrelu(sf.tensor([1, 2]))


@pytest.mark.parametrize("kw", [{"size": (3, 3)}, {"size": (5, 5)}, {"scale_factor": 1.7},
                                {"scale_factor": 0.6}])
def test_upsample_aliases(kw):
    check_op(lambda x: F.upsample_bilinear(x, **kw), lambda x: TF.upsample_bilinear(x, **kw),
             RNG.standard_normal((2, 3, 4, 4)))
    size = {"size": kw["size"][0]} if "size" in kw else kw
    check_op(lambda x: F.upsample_nearest(x, **size), lambda x: TF.upsample_nearest(x, **size),
             RNG.standard_normal((2, 3, 4)))
