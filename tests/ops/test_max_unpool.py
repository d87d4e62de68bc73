"""max_unpool1d/2d/3d against PyTorch: values back at a max pool's indices, and gradients."""

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

RNG = np.random.default_rng(1)


@pytest.mark.parametrize("n, shape, kw", [
    (1, (2, 3, 8), dict(kernel_size=2)),
    (1, (3, 9), dict(kernel_size=3, stride=2, padding=1)),
    (2, (2, 3, 6, 4), dict(kernel_size=2, stride=2)),
    (2, (2, 3, 8, 8), dict(kernel_size=3, stride=2, padding=1, output_size=(8, 8))),
    (3, (1, 2, 4, 6, 4), dict(kernel_size=2)),
    (3, (2, 4, 5, 4), dict(kernel_size=(2, 3, 2), stride=(2, 2, 1))),
])
def test_max_unpool(n, shape, kw):
    pool = getattr(TF, f"max_pool{n}d")
    size = kw.pop("output_size", None)
    x = torch.from_numpy(RNG.standard_normal(shape))
    _, idx = pool(x, return_indices=True, **kw)
    vals = RNG.standard_normal(tuple(idx.shape))
    ours = getattr(F, f"max_unpool{n}d")
    theirs = getattr(TF, f"max_unpool{n}d")
    # overlapping windows can share a max: the output keeps one write, and the gradient
    # (PyTorch's too) gathers at every index, so finite differences differ there
    unique = len(np.unique(idx.numpy().reshape(*idx.shape[:-n], -1)[0, 0])) == \
        np.prod(idx.shape[-n:])
    check_op(lambda v, i: ours(v, i, output_size=size, **kw),
             lambda v, i: theirs(v, i, output_size=size, **kw), vals, idx.numpy(),
             gradcheck=bool(unique))


def test_module_and_errors():
    x = sf.tensor(RNG.standard_normal((1, 1, 4, 4)), dtype=sf.float32)
    y, i = F.max_pool2d(x, 2, return_indices=True)
    out = nn.MaxUnpool2d(2)(y, i)
    ref = torch.nn.MaxUnpool2d(2)(torch.from_numpy(y.numpy()), torch.from_numpy(i.numpy()))
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    with pytest.raises(ShapeError, match="invalid max index"):
        F.max_unpool2d(y, i + 100, 2)
    with pytest.raises(ShapeError, match="within a stride"):
        F.max_unpool2d(y, i, 2, output_size=(9, 9))
