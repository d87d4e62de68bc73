"""hash_tensor (ops/reduce/hashing.py) against PyTorch: bits of every dtype, dims, keepdim."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf

RNG = np.random.default_rng(10)
DATA = {"float32": RNG.standard_normal((3, 4)).astype(np.float32),
        "float64": np.array([[1.0, np.nan], [-0.0, 2.5]]),
        "int64": RNG.integers(-9, 9, (3, 4)), "int8": np.array([[-1, 2], [3, 4]], np.int8),
        "bool": RNG.random((3, 4)) > 0.5}


@pytest.mark.parametrize("dtype", sorted(DATA))
@pytest.mark.parametrize("kw", [{}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": ()},
                                {"dim": (0, 1), "keepdim": True}])
def test_hash_tensor(dtype, kw):
    out = sf.hash_tensor(sf.tensor(DATA[dtype]), **kw)
    ref = torch.hash_tensor(torch.tensor(DATA[dtype]), **kw)
    assert out.dtype is sf.uint64 and tuple(out.shape) == tuple(ref.shape)
    assert out.tolist() == ref.tolist()


def test_hash_tensor_0d_meta_and_errors():
    assert sf.tensor(-8).hash_tensor(0).tolist() == torch.tensor(-8).hash_tensor(0).tolist()
    meta = sf.hash_tensor(sf.zeros(3, 4, device="meta"), 1, keepdim=True)
    assert tuple(meta.shape) == (3, 1) and meta.dtype is sf.uint64
    with pytest.raises(sf.ShapeError, match="reduction dim"):
        sf.hash_tensor(sf.zeros(0))
    with pytest.raises(sf.ShapeError, match="non-zero size"):
        sf.hash_tensor(sf.zeros(0, 3), 0)
    with pytest.raises(sf.ShapeflowError, match="mode"):
        sf.hash_tensor(sf.zeros(3), mode=1)
