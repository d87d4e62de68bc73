"""dist and pdist (ops/reduce/distances.py) and renorm (ops/reduce/renorm.py) against PyTorch:
values, float64 gradients (gradcheck), meta shapes, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn.functional as F
from tests.ops.harness import check_op

RNG = np.random.default_rng(4)


@pytest.mark.parametrize("p", [2, 1, 4, 0.5, math.inf, 0])
def test_dist(p):
    check_op(lambda a, b: sf.dist(a, b, p), lambda a, b: torch.dist(a, b, p),
             RNG.standard_normal((3, 4)), RNG.standard_normal(4), gradcheck=p not in (0,))


@pytest.mark.parametrize("shape", [(1, 1), (1, 5), (5, 1), (5, 5), (6, 3)])
@pytest.mark.parametrize("p", [2, 1, 3.5, math.inf])
def test_pdist(shape, p):
    check_op(lambda x: F.pdist(x, p), lambda x: torch.nn.functional.pdist(x, p),
             RNG.standard_normal(shape), gradcheck=shape[0] > 1)
    assert sf.pdist is F.pdist


def test_distance_errors():
    with pytest.raises(sf.DTypeError, match="floating"):
        sf.dist(sf.tensor([1, 2]), sf.tensor([1, 2]))
    with pytest.raises(sf.ShapeError, match="2D"):
        sf.pdist(sf.zeros(3))
    with pytest.raises(sf.ShapeError, match="non-negative"):
        sf.pdist(sf.zeros(3, 2), -1)


@pytest.mark.parametrize("p,dim,maxnorm", [(2, 1, 0.5), (2, -1, 0.5), (1, 2, 3), (math.inf, 2, 0.5),
                                           (3, 0, 100.0)])
def test_renorm(p, dim, maxnorm):
    check_op(lambda x: sf.renorm(x, p, dim, maxnorm), lambda x: torch.renorm(x, p, dim, maxnorm),
             RNG.standard_normal((3, 4, 5)))
    x = sf.tensor(RNG.standard_normal((3, 4)))
    assert x.renorm(p, 0, maxnorm).tolist() == sf.renorm(x, p, 0, maxnorm).tolist()


def test_renorm_errors():
    with pytest.raises(sf.ShapeError, match="non-positive"):
        sf.renorm(sf.zeros(2, 2), 0, 0, 1.0)
    with pytest.raises(sf.ShapeError, match="at least 2"):
        sf.renorm(sf.zeros(3), 2, 0, 1.0)
    with pytest.raises(sf.DTypeError, match="floating"):
        sf.renorm(sf.zeros(2, 2, dtype=sf.int64), 2, 0, 1.0)
