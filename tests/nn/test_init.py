"""nn.init: distributions (moments over many samples), fans, gains, seeding, meta no-ops."""

import math

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.nn import init


def big(*shape, dtype=None):
    return sf.empty(*shape, dtype=dtype)


@pytest.mark.parametrize("shape,fans", [
    ((20, 30), (30, 20)),
    ((16, 8, 3, 3), (72, 144)),
    ((4, 2, 5), (10, 20)),
])
def test_fans_match_torch(shape, fans):
    assert init._calculate_fan_in_and_fan_out(sf.empty(*shape)) == fans
    assert torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape)) == fans
    with pytest.raises(ValueError, match="fewer than 2"):
        init._calculate_fan_in_and_fan_out(sf.empty(5))


@pytest.mark.parametrize("name,param", [
    ("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
    ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", math.sqrt(5)), ("selu", None),
])
def test_calculate_gain_matches_torch(name, param):
    assert init.calculate_gain(name, param) == pytest.approx(
        torch.nn.init.calculate_gain(name, param), rel=1e-12)


def test_calculate_gain_rejects_unknown():
    with pytest.raises(ValueError):
        init.calculate_gain("swish")


def _moments(t):
    a = t.numpy().astype(np.float64)
    return a.mean(), a.std(), a.min(), a.max()


def test_uniform_and_normal():
    sf.manual_seed(0)
    t = big(400, 500)
    assert init.uniform_(t, -2.0, 3.0) is t
    mean, std, lo, hi = _moments(t)
    assert abs(mean - 0.5) < 0.01 and abs(std - 5 / math.sqrt(12)) < 0.01
    assert lo >= -2.0 and hi < 3.0 and lo < -1.99 and hi > 2.99
    init.normal_(t, 1.5, 0.5)
    mean, std, _, _ = _moments(t)
    assert abs(mean - 1.5) < 0.005 and abs(std - 0.5) < 0.005


def test_constant_ones_zeros_eye():
    t = big(3, 4)
    assert np.all(init.constant_(t, 2.5).numpy() == 2.5)
    assert np.all(init.ones_(t).numpy() == 1)
    assert np.all(init.zeros_(t).numpy() == 0)
    assert np.array_equal(init.eye_(t).numpy(), np.eye(3, 4))


@pytest.mark.parametrize("shape", [(300, 200), (64, 32, 3, 3)])
@pytest.mark.parametrize("gain", [1.0, 2.0])
def test_xavier(shape, gain):
    sf.manual_seed(1)
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(sf.empty(*shape))
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    t = init.xavier_uniform_(big(*shape), gain=gain)
    _, s, lo, hi = _moments(t)
    bound = math.sqrt(3) * std
    assert lo >= -bound and hi <= bound and abs(s - std) < 0.02 * std
    t = init.xavier_normal_(big(*shape), gain=gain)
    m, s, _, _ = _moments(t)
    assert abs(m) < 0.02 * std and abs(s - std) < 0.02 * std


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize("nonlinearity,a", [("relu", 0), ("leaky_relu", math.sqrt(5)),
                                            ("leaky_relu", 0), ("linear", 0)])
def test_kaiming(mode, nonlinearity, a):
    shape = (128, 64, 3, 3)
    sf.manual_seed(2)
    fan = 64 * 9 if mode == "fan_in" else 128 * 9
    std = init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
    t = init.kaiming_uniform_(big(*shape), a=a, mode=mode, nonlinearity=nonlinearity)
    _, s, lo, hi = _moments(t)
    assert lo >= -math.sqrt(3) * std and hi <= math.sqrt(3) * std
    assert abs(s - std) < 0.02 * std
    t = init.kaiming_normal_(big(*shape), a=a, mode=mode, nonlinearity=nonlinearity)
    m, s, _, _ = _moments(t)
    assert abs(m) < 0.02 * std and abs(s - std) < 0.02 * std
    with pytest.raises(ValueError, match="fan_avg"):
        init.kaiming_uniform_(big(4, 4), mode="fan_avg")


def _truncnorm_moments(mean, std, a, b):
    """Mean and std of N(mean, std^2) truncated to [a, b] (closed form)."""
    al, be = (a - mean) / std, (b - mean) / std
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    Phi = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2  # noqa: E731
    Z = Phi(be) - Phi(al)
    m = mean + std * (phi(al) - phi(be)) / Z
    var = std**2 * (1 + (al * phi(al) - be * phi(be)) / Z - ((phi(al) - phi(be)) / Z) ** 2)
    return m, math.sqrt(var)


@pytest.mark.parametrize("mean,std,a,b", [
    (0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (1.0, 2.0, 0.0, 5.0),
    (0.0, 1.0, 3.0, 4.0),  # a far tail (the inverse-CDF path)
    (0.0, 1.0, -0.01, 0.01),  # a narrow window
])
def test_trunc_normal(mean, std, a, b):
    sf.manual_seed(3)
    t = init.trunc_normal_(big(300, 300), mean=mean, std=std, a=a, b=b)
    m, s, lo, hi = _moments(t)
    em, es = _truncnorm_moments(mean, std, a, b)
    assert lo >= a and hi <= b
    assert abs(m - em) < 0.01 * es + 1e-6 and abs(s - es) < 0.01 * es
    if not a < mean < b:
        return  # torch's own sampler is slow and inexact out in the tails
    # and against torch's sampler
    tt = torch.nn.init.trunc_normal_(torch.empty(300, 300), mean, std, a, b)
    assert abs(m - tt.mean().item()) < 0.02 * es + 1e-6
    assert abs(s - tt.std().item()) < 0.02 * es


def test_seeded_reproducible_and_in_place():
    t = big(5, 7)
    arr, v = t._data, t.version
    sf.manual_seed(42)
    init.kaiming_uniform_(t)
    first = t.numpy().copy()
    assert t._data is arr and t.version == v + 1
    sf.manual_seed(42)
    init.kaiming_uniform_(t)
    assert np.array_equal(first, t.numpy())
    g = sf.Generator().manual_seed(7)
    a = init.normal_(big(4), generator=g).numpy().copy()
    g.manual_seed(7)
    assert np.array_equal(a, init.normal_(big(4), generator=g).numpy())


def test_parameters_under_grad_mode():
    p = sf.nn.Parameter(sf.empty(3, 3))
    init.xavier_uniform_(p)  # a leaf that requires grad: fine, nothing is recorded
    assert p.grad_fn is None and p.requires_grad


@pytest.mark.parametrize("dtype", [sf.float64, sf.float16, sf.bfloat16])
def test_other_dtypes(dtype):
    sf.manual_seed(0)
    t = init.normal_(big(200, 200, dtype=dtype), 0.0, 2.0)
    assert t.dtype is dtype
    a = t.numpy().astype(np.float64)
    assert abs(a.std() - 2.0) < 0.05
    init.uniform_(t, -1, 1)
    a = t.numpy().astype(np.float64)
    assert a.min() >= -1 and a.max() <= 1


def test_meta_is_a_no_op():
    for fn in (init.uniform_, init.normal_, init.zeros_, init.ones_, init.xavier_uniform_,
               init.xavier_normal_, init.kaiming_uniform_, init.kaiming_normal_,
               init.trunc_normal_):
        t = sf.empty(4, 5, device="meta")
        assert fn(t) is t and t._data is None
    assert init.constant_(sf.empty(3, device="meta"), 1.0)._data is None
    with pytest.raises(ValueError):
        init.xavier_uniform_(sf.empty(3, device="meta"))  # fans still checked


def test_zero_element_warns():
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(sf.empty(0, 3))
