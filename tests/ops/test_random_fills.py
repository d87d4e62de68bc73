"""The in-place random fills geometric_, log_normal_, cauchy_ (and uniform_'s range check):
distributions by Kolmogorov-Smirnov / chi-square tests at a fixed seed, generator= streams,
dtypes, meta, and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.errors import DTypeError
from shapeflow.ops.sampling import DistributionError
from tests.ops.test_sampling import ALPHA, chi2_pvalue, ks_passes

N = 20000


def _normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


@pytest.mark.parametrize("mean,std", [(1.0, 2.0), (0.0, 0.25), (0.5, 1.0)])
def test_log_normal(mean, std):
    sf.manual_seed(0)
    t = sf.empty(N, dtype=sf.float64)
    assert t.log_normal_(mean, std) is t
    assert (t.numpy() > 0).all()
    assert ks_passes(np.log(t.numpy()), lambda x: _normal_cdf((x - mean) / std))
    assert sf.empty(3).log_normal_().dtype == sf.float32


@pytest.mark.parametrize("median,sigma", [(0.0, 1.0), (-2.0, 0.5)])
def test_cauchy(median, sigma):
    sf.manual_seed(0)
    t = sf.empty(N).cauchy_(median, sigma)
    assert ks_passes(t.numpy().astype(np.float64),
                     lambda x: 0.5 + np.arctan((x - median) / sigma) / math.pi)
    assert abs(float(np.median(t.numpy())) - median) < 0.05 * sigma


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
@pytest.mark.parametrize("dtype", [sf.float32, sf.int64])
def test_geometric(p, dtype):
    sf.manual_seed(0)
    t = sf.zeros(N, dtype=dtype).geometric_(p)
    assert t.dtype == dtype
    k = t.numpy().astype(np.int64)
    assert k.min() >= 1
    top = 6  # classes 1..5 and the tail >= 6
    observed = [(k == j).sum() for j in range(1, top)] + [(k >= top).sum()]
    probs = [(1 - p) ** (j - 1) * p for j in range(1, top)]
    expected = [N * q for q in probs] + [N * (1 - sum(probs))]
    assert chi2_pvalue(observed, expected) > ALPHA
    assert abs(k.mean() - 1 / p) < 5 * math.sqrt((1 - p) / p**2 / N)


@pytest.mark.parametrize("fill,args", [("geometric_", (0.3,)), ("log_normal_", ()),
                                       ("cauchy_", ()), ("uniform_", (1.0, 2.0)),
                                       ("exponential_", (1.5,))])
def test_generator_streams_and_shapes(fill, args):
    g1, g2 = sf.Generator().manual_seed(7), sf.Generator().manual_seed(7)
    a = getattr(sf.empty(4, 5), fill)(*args, generator=g1)
    b = getattr(sf.empty(4, 5), fill)(*args, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.shape == (4, 5)
    c = getattr(sf.empty(4, 5), fill)(*args, generator=g1)
    assert not np.array_equal(a.numpy(), c.numpy())
    ref = getattr(torch.empty(4, 5, dtype=torch.float64), fill)(*args)
    ours = getattr(sf.empty(4, 5, dtype=sf.float64), fill)(*args)
    assert ours.dtype == sf.float64 and tuple(ours.shape) == tuple(ref.shape)
    m = getattr(sf.zeros(2, 3, device="meta"), fill)(*args)
    assert m.device == "meta" and m.shape == (2, 3)


def test_errors():
    t = sf.zeros(4)
    for bad in (0.0, 1.0, -1.0):
        with pytest.raises(DistributionError, match="p must be in"):
            t.geometric_(bad)
    with pytest.raises(DistributionError, match="std must be > 0"):
        t.log_normal_(0.0, 0.0)
    with pytest.raises(DistributionError, match="sigma must be > 0"):
        t.cauchy_(0.0, 0.0)
    with pytest.raises(DistributionError, match="from=2"):
        t.uniform_(2.0, 1.0)
    with pytest.raises(DTypeError):
        sf.zeros(3, dtype=sf.int64).cauchy_()
    with pytest.raises(sf.GraphError, match="cauchy_"):
        sf.zeros(3, requires_grad=True).cauchy_()
