"""combinations and unravel_index (ops/movement/combinatorics.py) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op


@pytest.mark.parametrize("r", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("with_replacement", [False, True])
def test_combinations(r, with_replacement):
    a = np.arange(4.0) * 1.5
    check_op(lambda x: sf.combinations(x, r, with_replacement),
             lambda x: torch.combinations(x, r, with_replacement), a, gradcheck=r > 0)
    ints = sf.combinations(sf.tensor([3, 1, 2]), r, with_replacement)
    ref = torch.combinations(torch.tensor([3, 1, 2]), r, with_replacement)
    assert ints.dtype is sf.int64 and ints.tolist() == ref.tolist()


def test_combinations_needs_a_vector():
    with pytest.raises(sf.ShapeError, match="1D"):
        sf.combinations(sf.zeros(2, 2))


@pytest.mark.parametrize("shape", [(2, 3), (4, 1073741824), 3, (2, 2, 5)])
def test_unravel_index(shape):
    idx = np.array([[0, 5, -1], [13, -7, 6]])
    out = sf.unravel_index(sf.tensor(idx), shape)
    ref = torch.unravel_index(torch.tensor(idx), shape)
    assert len(out) == len(ref)
    for o, t in zip(out, ref):
        assert o.dtype is sf.int64 and o.tolist() == t.tolist()


def test_unravel_index_errors_and_meta():
    with pytest.raises(sf.DTypeError, match="integer"):
        sf.unravel_index(sf.tensor([1.0]), (2, 3))
    with pytest.raises(sf.ShapeError, match="negative"):
        sf.unravel_index(sf.tensor([1]), (-1, 2))
    with pytest.raises(sf.ShapeError, match="zero"):
        sf.unravel_index(sf.tensor([1]), (0, 2))
    out = sf.unravel_index(sf.zeros(4, dtype=sf.int64, device="meta"), (2, 3))
    assert len(out) == 2 and tuple(out[0].shape) == (4,) and out[0].device == "meta"
