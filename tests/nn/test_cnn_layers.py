"""CNN layers against torch.nn: BatchNorm state and modes, Conv1d/ConvTranspose, pools."""

import math

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn


def copy_to_torch(m, t):
    t.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in
                       m.state_dict().items()})


def normal(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


BN = [(nn.BatchNorm1d, torch.nn.BatchNorm1d, (6, 4)), (nn.BatchNorm1d, torch.nn.BatchNorm1d,
                                                      (6, 4, 5)),
      (nn.BatchNorm2d, torch.nn.BatchNorm2d, (3, 4, 5, 5)),
      (nn.BatchNorm3d, torch.nn.BatchNorm3d, (2, 4, 3, 2, 3))]


@pytest.mark.parametrize("cls,tcls,shape", BN)
@pytest.mark.parametrize("kw", [{}, {"momentum": None}, {"affine": False},
                                {"track_running_stats": False}, {"momentum": 0.3, "eps": 1e-3}])
def test_batchnorm_train_then_eval_matches_torch(cls, tcls, shape, kw):
    m, t = cls(4, **kw), tcls(4, **kw)
    assert list(m.state_dict()) == list(t.state_dict())
    if kw.get("affine", True):
        with sf.no_grad():
            m.weight.copy_(sf.from_numpy(normal(4, seed=9) + 1))
            m.bias.copy_(sf.from_numpy(normal(4, seed=8)))
    copy_to_torch(m, t)
    for i in range(3):
        x = normal(*shape, seed=i) * (i + 1) + i
        xs, xt = sf.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
        ys, yt = m(xs), t(xt)
        np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
        g = normal(*shape, seed=10 + i)
        (ys * sf.from_numpy(g)).sum().backward()
        (yt * torch.from_numpy(g)).sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=k)
    m.eval()
    t.eval()
    x = normal(*shape, seed=7)
    np.testing.assert_allclose(m(sf.from_numpy(x)).detach().numpy(), t(torch.from_numpy(x)).detach()
                               .numpy(), rtol=1e-4, atol=1e-5)


def test_batchnorm_loads_a_torch_state_dict_and_counts_batches():
    t = torch.nn.BatchNorm2d(3)
    t(torch.randn(4, 3, 2, 2))
    m = nn.BatchNorm2d(3)
    m.load_state_dict(t.state_dict())
    assert int(m.num_batches_tracked.item()) == 1
    m(sf.randn(4, 3, 2, 2))
    assert int(m.num_batches_tracked.item()) == 2
    assert m.num_batches_tracked.dtype is sf.int64


def test_batchnorm2d_given_3d_input_names_the_rule():
    with pytest.raises(sf.ShapeError) as e:
        nn.BatchNorm2d(4)(sf.randn(4, 5, 5))
    msg = str(e.value)
    assert "BatchNorm2d" in msg and "4-D" in msg and "3-D" in msg and "unsqueeze(0)" in msg
    with pytest.raises(sf.ShapeError, match="BatchNorm1d"):
        nn.BatchNorm1d(4)(sf.randn(2, 4, 5, 5))


def test_batchnorm_runs_on_meta_without_data():
    m = nn.BatchNorm2d(8).to("meta")
    x = sf.empty("B", 8, "H", "W", device="meta", requires_grad=True)
    y = m(x)
    assert y._data is None and str(y.shape) == str(x.shape)
    y.sum().backward()
    assert x.grad._data is None


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, 2, "same"])
def test_conv1d_padding_modes_match_torch(mode, padding):
    sf.manual_seed(0)
    m = nn.Conv1d(3, 4, 3, padding=padding, dilation=2 if padding == "same" else 1,
                  padding_mode=mode)
    t = torch.nn.Conv1d(3, 4, 3, padding=padding, dilation=2 if padding == "same" else 1,
                        padding_mode=mode)
    copy_to_torch(m, t)
    x = normal(2, 3, 9)
    xs, xt = sf.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    ys, yt = m(xs), t(xt)
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    ys.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.weight.grad.numpy(), t.weight.grad.numpy(), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv2d_padding_modes_match_torch(mode):
    sf.manual_seed(0)
    m = nn.Conv2d(2, 3, (3, 2), padding=(1, 1), padding_mode=mode, groups=1)
    t = torch.nn.Conv2d(2, 3, (3, 2), padding=(1, 1), padding_mode=mode)
    copy_to_torch(m, t)
    x = normal(2, 2, 5, 6)
    np.testing.assert_allclose(m(sf.from_numpy(x)).detach().numpy(),
                               t(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_layer_shapes_and_init_match_torch():
    pairs = [(nn.Conv1d(4, 6, 3, groups=2), torch.nn.Conv1d(4, 6, 3, groups=2)),
             (nn.ConvTranspose1d(4, 6, 3, groups=2), torch.nn.ConvTranspose1d(4, 6, 3, groups=2)),
             (nn.ConvTranspose2d(4, 6, 3), torch.nn.ConvTranspose2d(4, 6, 3))]
    for m, t in pairs:
        # PyTorch's default init: weight and bias uniform in +-1/sqrt(fan_in)
        fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(t.weight)
        bound = 1 / math.sqrt(fan_in)
        for (k, v), (tk, tv) in zip(m.state_dict().items(), t.state_dict().items()):
            assert k == tk and tuple(v.shape) == tuple(tv.shape)
            top = float(np.abs(v.numpy()).max())
            assert top <= bound * (1 + 1e-6)
            if k == "weight":  # dozens of draws: the largest is near the bound
                assert top > bound / 2
    assert repr(nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1)) == \
        repr(torch.nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1))
    assert repr(nn.BatchNorm2d(4)) == repr(torch.nn.BatchNorm2d(4))


@pytest.mark.parametrize("ms,ts,shape", [
    (nn.MaxPool1d(3, 2, 1), torch.nn.MaxPool1d(3, 2, 1), (2, 3, 10)),
    (nn.AvgPool1d(2), torch.nn.AvgPool1d(2), (2, 3, 10)),
    (nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4), (2, 3, 10)),
    (nn.AdaptiveAvgPool2d((2, 3)), torch.nn.AdaptiveAvgPool2d((2, 3)), (2, 3, 5, 7)),
    (nn.AdaptiveMaxPool2d(3), torch.nn.AdaptiveMaxPool2d(3), (2, 3, 5, 7)),
])
def test_pool_modules_match_torch(ms, ts, shape):
    x = normal(*shape)
    np.testing.assert_allclose(ms(sf.from_numpy(x)).numpy(), ts(torch.from_numpy(x)).numpy(),
                               rtol=1e-5, atol=1e-6)
