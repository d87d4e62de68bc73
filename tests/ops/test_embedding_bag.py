"""embedding_bag and nn.EmbeddingBag against PyTorch: modes, offsets, weights, padding_idx."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn as nn
import shapeflow.nn.functional as F
from shapeflow.errors import ShapeError
from tests.ops.harness import check_op

RNG = np.random.default_rng(4)
IDX = np.array([1, 4, 4, 0, 2, 7, 3, 5, 6], dtype=np.int64)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("offsets, last", [
    (np.array([0, 2, 2, 5], dtype=np.int64), False),  # an empty bag
    (np.array([0, 3, 9], dtype=np.int64), True),
])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag_offsets(mode, offsets, last, padding_idx):
    w = RNG.standard_normal((8, 3))
    kw = dict(mode=mode, include_last_offset=last, padding_idx=padding_idx)
    check_op(lambda wt, i, o: F.embedding_bag(i, wt, o, **kw),
             lambda wt, i, o: TF.embedding_bag(i, wt, o, **kw), w, IDX, offsets)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d(mode):
    w, idx = RNG.standard_normal((8, 4)), IDX[:8].reshape(2, 4)
    check_op(lambda wt, i: F.embedding_bag(i, wt, mode=mode),
             lambda wt, i: TF.embedding_bag(i, wt, mode=mode), w, idx)


def test_per_sample_weights():
    w, psw = RNG.standard_normal((8, 3)), RNG.standard_normal(9)
    off = np.array([0, 4], dtype=np.int64)
    check_op(lambda wt, p, i, o: F.embedding_bag(i, wt, o, mode="sum", per_sample_weights=p),
             lambda wt, p, i, o: TF.embedding_bag(i, wt, o, mode="sum", per_sample_weights=p),
             w, psw, IDX, off)


def test_module_and_errors():
    m = nn.EmbeddingBag(8, 3, mode="sum")
    t = torch.nn.EmbeddingBag(8, 3, mode="sum")
    t.weight.data = torch.from_numpy(m.weight.detach().numpy().copy())
    ids, off = sf.tensor(IDX), sf.tensor([0, 5])
    np.testing.assert_allclose(m(ids, off).detach().numpy(),
                               t(torch.tensor(IDX), torch.tensor([0, 5])).detach().numpy(),
                               rtol=1e-6)
    with pytest.raises(ShapeError, match="per_sample_weights"):
        F.embedding_bag(ids, m.weight, off, mode="max", per_sample_weights=sf.ones(9))
    with pytest.raises(ShapeError, match="offsets"):
        F.embedding_bag(ids, m.weight)
    with pytest.raises(ShapeError, match="offsets must start at 0"):
        F.embedding_bag(ids, m.weight, sf.tensor([1, 3]))
