"""nn.Bilinear, nn.ChannelShuffle, nn.Threshold and nn.RReLU as PyTorch's modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn as nn


def _load_from_torch(ours: nn.Module, ref: torch.nn.Module) -> None:
    ours.load_state_dict({k: sf.from_numpy(v.detach().numpy().copy())
                          for k, v in ref.state_dict().items()})


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear(bias):
    ours, ref = nn.Bilinear(3, 4, 5, bias=bias), torch.nn.Bilinear(3, 4, 5, bias=bias)
    assert repr(ours) == repr(ref)
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert tuple(ours.weight.shape) == (5, 3, 4)
    bound = 1 / np.sqrt(3)  # PyTorch's init: U(+-1/sqrt(in1_features)) for both
    for p in ours.parameters():
        assert np.abs(p.detach().numpy()).max() <= bound and p.detach().numpy().std() > 0
    _load_from_torch(ours, ref)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 6, 4))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    y = ours(sf.from_numpy(a32), sf.from_numpy(b32))
    r = ref(torch.from_numpy(a32), torch.from_numpy(b32))
    np.testing.assert_allclose(y.detach().numpy(), r.detach().numpy(), rtol=1e-5, atol=1e-6)
    y.sum().backward()
    r.sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(ValueError):
        nn.Bilinear(0, 2, 3)


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_channel_shuffle(groups):
    ours, ref = nn.ChannelShuffle(groups), torch.nn.ChannelShuffle(groups)
    assert repr(ours) == repr(ref)
    x = np.arange(2 * 6 * 2 * 2, dtype=np.float32).reshape(2, 6, 2, 2)
    np.testing.assert_array_equal(ours(sf.from_numpy(x)).numpy(),
                                  ref(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("inplace", [False, True])
def test_threshold(inplace):
    ours, ref = nn.Threshold(0.1, 20.0, inplace), torch.nn.Threshold(0.1, 20.0, inplace)
    assert repr(ours) == repr(ref)
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(ours(sf.from_numpy(x.copy())).numpy(),
                                  ref(torch.from_numpy(x.copy())).numpy())


def test_rrelu():
    ours, ref = nn.RReLU(0.1, 0.3), torch.nn.RReLU(0.1, 0.3)
    assert repr(ours) == repr(ref) and repr(nn.RReLU(inplace=True)) == repr(
        torch.nn.RReLU(inplace=True))
    x = np.random.default_rng(2).standard_normal((4, 50)).astype(np.float32)
    ours.eval()
    ref.eval()
    np.testing.assert_allclose(ours(sf.from_numpy(x)).numpy(), ref(torch.from_numpy(x)).numpy(),
                               rtol=1e-6)
    ours.train()
    y = ours(sf.from_numpy(x)).numpy()
    neg = x < 0
    slopes = y[neg] / x[neg]  # drawn per element from U(lower, upper) in training
    assert np.all((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)) and slopes.std() > 0.01
    np.testing.assert_array_equal(y[~neg], x[~neg])
