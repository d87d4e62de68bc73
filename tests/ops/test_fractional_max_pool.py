"""fractional_max_pool2d / 3d and their modules against PyTorch, given the same samples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn as nn
import shapeflow.nn.functional as F
from shapeflow.errors import DTypeError, ShapeRuntimeError
from tests.ops.harness import check_op

CASES = [  # nd, input shape, kernel, output_size, output_ratio
    (2, (2, 3, 9, 9), 3, 2, None), (2, (1, 2, 10, 7), (2, 3), (5, 3), None),
    (2, (3, 9, 8), 2, None, (0.5, 0.7)), (2, (1, 1, 4, 4), 2, 1, None),
    (3, (2, 2, 6, 7, 8), 2, (3, 4, 5), None), (3, (1, 2, 5, 9, 6), (1, 3, 2), None, 0.5),
]


def _args(nd, shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    n = 1 if len(shape) == nd + 1 else shape[0]
    u = rng.random((n, shape[-nd - 1], nd)).astype(dtype)
    return x, u


@pytest.mark.parametrize("nd,shape,k,size,ratio", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_and_indices_equal_torch(nd, shape, k, size, ratio, dtype):
    x, u = _args(nd, shape, dtype)
    fs = getattr(F, f"fractional_max_pool{nd}d")
    ft = getattr(TF, f"fractional_max_pool{nd}d")
    out, idx = fs(sf.from_numpy(x), k, size, ratio, True, _random_samples=sf.from_numpy(u))
    ref, ridx = ft(torch.from_numpy(x), k, size, ratio, True, _random_samples=torch.from_numpy(u))
    assert out.dtype == sf.from_numpy(x).dtype and idx.dtype is sf.int64
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    np.testing.assert_array_equal(idx.numpy(), ridx.numpy())


@pytest.mark.parametrize("nd,shape,k,size,ratio", CASES[:2] + CASES[4:5])
def test_grads_gradcheck_and_meta(nd, shape, k, size, ratio):
    x, u = _args(nd, shape, seed=1)
    fs = getattr(F, f"fractional_max_pool{nd}d")
    ft = getattr(TF, f"fractional_max_pool{nd}d")
    us, ut = sf.from_numpy(u.astype(np.float32)), torch.from_numpy(u.astype(np.float32))
    # the samples follow the input's dtype (float64 in gradcheck) and device (meta)
    check_op(lambda a: fs(a, k, size, ratio, _random_samples=us.to(a.dtype).to(a.device)),
             lambda a: ft(a, k, size, ratio, _random_samples=ut), x)


def test_nan_propagates_and_last_nan_wins():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = np.nan
    u = np.full((1, 1, 2), 0.3)
    ours = F.fractional_max_pool2d(sf.from_numpy(x), 2, 2, return_indices=True,
                                   _random_samples=sf.from_numpy(u))
    ref = TF.fractional_max_pool2d(torch.from_numpy(x), 2, 2, return_indices=True,
                                   _random_samples=torch.from_numpy(u))
    np.testing.assert_array_equal(ours[0].numpy(), ref[0].numpy())
    np.testing.assert_array_equal(ours[1].numpy(), ref[1].numpy())


def test_draws_from_shapeflow_generator():
    x = sf.from_numpy(np.random.default_rng(2).standard_normal((2, 3, 12, 12)))
    sf.manual_seed(7)
    a = F.fractional_max_pool2d(x, 3, output_ratio=0.5)
    sf.manual_seed(7)
    b = F.fractional_max_pool2d(x, 3, output_ratio=0.5)
    assert tuple(a.shape) == (2, 3, 6, 6)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_errors():
    x = sf.zeros((1, 2, 5, 5))
    with pytest.raises(ShapeRuntimeError):  # output 4 + kernel 3 - 1 > 5
        F.fractional_max_pool2d(x, 3, 4)
    with pytest.raises(DTypeError):
        F.fractional_max_pool2d(x, 2, 2, _random_samples=sf.zeros((1, 2, 2), dtype=sf.float64))
    with pytest.raises(ShapeRuntimeError):
        F.fractional_max_pool2d(x, 2, 2, _random_samples=sf.zeros((1, 2, 3)))
    with pytest.raises(ValueError):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError):
        nn.FractionalMaxPool3d(2, output_ratio=1.5)


@pytest.mark.parametrize("nd", [2, 3])
def test_modules_match_torch(nd):
    x, u = _args(nd, (2, 3) + (8,) * nd, seed=3)
    name = f"FractionalMaxPool{nd}d"
    ours = getattr(nn, name)(2, output_size=3, return_indices=True,
                             _random_samples=sf.from_numpy(u))
    ref = getattr(torch.nn, name)(2, output_size=3, return_indices=True,
                                  _random_samples=torch.from_numpy(u))
    assert ours.kernel_size == ref.kernel_size and ours.output_size == ref.output_size
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert repr(ours) == repr(ref)
    (o, i), (r, ri) = ours(sf.from_numpy(x)), ref(torch.from_numpy(x))
    np.testing.assert_array_equal(o.numpy(), r.numpy())
    np.testing.assert_array_equal(i.numpy(), ri.numpy())
