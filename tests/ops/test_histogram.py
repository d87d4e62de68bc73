"""histogram and histogramdd (ops/reduce/histogram.py) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf

RNG = np.random.default_rng(6)


def _same(out, ref):
    np.testing.assert_allclose(out.hist.numpy(), ref.hist.numpy(), rtol=1e-6)
    edges_out = out.bin_edges if isinstance(out.bin_edges, list) else [out.bin_edges]
    edges_ref = ref.bin_edges if isinstance(ref.bin_edges, tuple) else [ref.bin_edges]
    for e, r in zip(edges_out, edges_ref):
        assert e.dtype is sf.float32
        np.testing.assert_array_equal(e.numpy(), r.numpy())  # PyTorch's own linspace


@pytest.mark.parametrize("kw", [{"bins": 5}, {"bins": 3, "range": (-1.0, 1.0)},
                                {"bins": 4, "density": True}, {"bins": 1}])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram(kw, weighted):
    x = RNG.standard_normal(50).astype(np.float32)
    w = RNG.random(50).astype(np.float32) if weighted else None
    out = sf.histogram(sf.tensor(x), weight=None if w is None else sf.tensor(w), **kw)
    ref = torch.histogram(torch.tensor(x), weight=None if w is None else torch.tensor(w), **kw)
    _same(out, ref)


@pytest.mark.parametrize("data", [[], [2.0, 2.0], [1.0, 2.0, 3.0, 4.0, 4.0]])
def test_histogram_edge_cases(data):
    _same(sf.histogram(sf.tensor(data), 3), torch.histogram(torch.tensor(data), 3))
    edges = [0.0, 1.0, 2.5, 4.0]
    _same(sf.histogram(sf.tensor(data), sf.tensor(edges)),
          torch.histogram(torch.tensor(data), torch.tensor(edges)))


@pytest.mark.parametrize("bins", [[3, 3], 2, [2, 4]])
@pytest.mark.parametrize("density", [False, True])
def test_histogramdd(bins, density):
    x = RNG.standard_normal((30, 2)).astype(np.float32)
    _same(sf.histogramdd(sf.tensor(x), bins, density=density),
          torch.histogramdd(torch.tensor(x), bins, density=density))
    rng = [0.0, 1.0, -1.0, 1.0]
    _same(sf.histogramdd(sf.tensor(x), bins, rng), torch.histogramdd(torch.tensor(x), bins, rng))


def test_histogram_errors_and_meta():
    with pytest.raises(sf.DTypeError, match="floating"):
        sf.histogram(sf.tensor([1, 2]), 2)
    with pytest.raises(sf.ShapeError, match="max must be larger"):
        sf.histogram(sf.tensor([1.0]), 2, range=(2.0, 1.0))
    hist, edges = sf.histogram(sf.zeros(10, device="meta"), 4)
    assert tuple(hist.shape) == (4,) and tuple(edges.shape) == (5,) and hist.device == "meta"
