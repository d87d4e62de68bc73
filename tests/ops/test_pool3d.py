"""3-D pools, adaptive 3-D pools and adaptive_max_pool1d against PyTorch (values, grads, meta)."""

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

RNG = np.random.default_rng(0)


def _x(*shape):
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=(2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0)),
    dict(kernel_size=3, stride=2, padding=1, dilation=(2, 1, 1), ceil_mode=True),
    dict(kernel_size=(3, 2, 2), stride=2, ceil_mode=True),
])
@pytest.mark.parametrize("indices", [False, True])
def test_max_pool3d(kw, indices):
    check_op(lambda x: F.max_pool3d(x, return_indices=indices, **kw),
             lambda x: TF.max_pool3d(x, return_indices=indices, **kw), _x(2, 3, 5, 6, 7))


def test_max_pool3d_unbatched_and_top_level():
    check_op(lambda x: sf.max_pool3d(x, 2), lambda x: torch.max_pool3d(x, 2), _x(3, 4, 4, 5))


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
    dict(kernel_size=(2, 3, 3), stride=(2, 1, 2), padding=(1, 1, 0), divisor_override=5),
])
def test_avg_pool3d(kw):
    check_op(lambda x: F.avg_pool3d(x, **kw), lambda x: TF.avg_pool3d(x, **kw),
             _x(2, 2, 5, 6, 7))


@pytest.mark.parametrize("size", [1, 2, (3, None, 4), (2, 5, 3)])
def test_adaptive_avg_pool3d(size):
    check_op(lambda x: F.adaptive_avg_pool3d(x, size),
             lambda x: TF.adaptive_avg_pool3d(x, size), _x(2, 3, 5, 6, 7))


@pytest.mark.parametrize("size", [1, (2, 3, 4), (3, None, 4)])
@pytest.mark.parametrize("indices", [False, True])
def test_adaptive_max_pool3d(size, indices):
    check_op(lambda x: F.adaptive_max_pool3d(x, size, indices),
             lambda x: TF.adaptive_max_pool3d(x, size, indices), _x(1, 2, 5, 5, 6))


@pytest.mark.parametrize("size", [1, 3, 7])
@pytest.mark.parametrize("indices", [False, True])
def test_adaptive_max_pool1d(size, indices):
    check_op(lambda x: F.adaptive_max_pool1d(x, size, indices),
             lambda x: TF.adaptive_max_pool1d(x, size, indices), _x(2, 3, 10))


def test_modules_match_functional():
    x = sf.tensor(_x(1, 2, 4, 4, 4), dtype=sf.float32)
    t = torch.from_numpy(x.numpy())
    pairs = [(nn.MaxPool3d(2, return_indices=True), torch.nn.MaxPool3d(2, return_indices=True)),
             (nn.AvgPool3d(3, 1, 1), torch.nn.AvgPool3d(3, 1, 1)),
             (nn.AdaptiveAvgPool3d(3), torch.nn.AdaptiveAvgPool3d(3)),
             (nn.AdaptiveMaxPool3d((2, 3, 1)), torch.nn.AdaptiveMaxPool3d((2, 3, 1)))]
    for ours, theirs in pairs:
        a, b = ours(x), theirs(t)
        for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-5, atol=1e-6)
    y = nn.AdaptiveMaxPool1d(3)(x.reshape(1, 4, 32))
    ref = torch.nn.AdaptiveMaxPool1d(3)(t.reshape(1, 4, 32))
    np.testing.assert_allclose(y.numpy(), ref.numpy())


def test_bad_inputs_raise_shapeflow_errors():
    with pytest.raises(ShapeError, match="max_pool3d"):
        F.max_pool3d(sf.zeros(2, 3, 4), 2)
    with pytest.raises(ShapeError, match="padding"):
        F.avg_pool3d(sf.zeros(1, 1, 4, 4, 4), 2, padding=2)
    with pytest.raises(ShapeError, match="output_size"):
        F.adaptive_avg_pool3d(sf.zeros(1, 1, 4, 4, 4), (2, 2))
