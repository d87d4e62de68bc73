"""lerp, hypot, atan2, logaddexp(2), fmod, remainder, addcmul/addcdiv and clamp with tensor
bounds vs PyTorch: values, grads, float64 gradcheck, meta shapes, broadcasting."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(1)
PAIRS = [((3,), (3,)), ((2, 3), (3,)), ((4, 1), (1, 5)), ((), (3,)), ((0, 3), (3,))]


def normal(shape):
    return np.asarray(rng.standard_normal(shape))


def away_from_zero(shape):
    x = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return np.asarray(x)


BINARY = [
    ("hypot", sf.hypot, torch.hypot, normal, normal),
    ("atan2", sf.atan2, torch.atan2, normal, away_from_zero),
    ("arctan2", sf.arctan2, torch.arctan2, normal, away_from_zero),
    ("logaddexp", sf.logaddexp, torch.logaddexp, normal, normal),
    ("logaddexp2", sf.logaddexp2, torch.logaddexp2, normal, normal),
    ("fmod", sf.fmod, torch.fmod, normal, away_from_zero),
    ("remainder", sf.remainder, torch.remainder, normal, away_from_zero),
    ("method_hypot", lambda a, b: a.hypot(b), lambda a, b: a.hypot(b), normal, normal),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,ma,mb", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("sa,sb", PAIRS, ids=str)
def test_binary(name, sf_fn, t_fn, ma, mb, sa, sb):
    a, b = ma(sa), mb(sb)
    if name in ("fmod", "remainder"):  # keep a/b off integers, where the gradient jumps
        a = np.asarray(np.round(a * 4) / 4 + 0.1)
    check_op(sf_fn, t_fn, a, b)


@pytest.mark.parametrize("fn", ["fmod", "remainder"])
def test_fmod_remainder_signs_and_scalars(fn):
    a = np.array([-5.5, -3.0, 3.0, 5.5, -0.5])
    for b in (2, -2, 2.5, -1.5):
        got = getattr(sf, fn)(sf.tensor(a), b)
        np.testing.assert_array_equal(got.numpy(), getattr(torch, fn)(torch.tensor(a),
                                                                       b).numpy())
    ints = getattr(sf, fn)(sf.tensor([-7, 7]), sf.tensor([3, -3]))
    assert ints.tolist() == getattr(torch, fn)(torch.tensor([-7, 7]),
                                               torch.tensor([3, -3])).tolist()
    x = sf.tensor([-5.5, 5.5], requires_grad=True)
    getattr(x, fn)(2.0).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_lerp():
    for w in (0.3, 0.8, -0.2, 1.0):
        check_op(lambda s, e, w=w: sf.lerp(s, e, w), lambda s, e, w=w: torch.lerp(s, e, w),
                 normal((2, 3)), normal((3,)))
    check_op(sf.lerp, torch.lerp, normal((2, 3)), normal((2, 3)),
             np.asarray(rng.uniform(-0.5, 1.5, (2, 3))))
    check_op(sf.lerp, torch.lerp, normal((4, 1)), normal((1, 3)), np.asarray(rng.uniform(
        0, 1, (3,))))
    # weight 1 gives end exactly (computed from end when |weight| >= 0.5)
    e = np.array([0.1, 1e-8, 3.3], np.float32)
    out = sf.lerp(sf.tensor([1e8, -7.0, 2.0]), sf.tensor(e), 1.0)
    np.testing.assert_array_equal(out.numpy(), e)


def test_lerp_inplace_ema():
    avg, new = sf.zeros(3), sf.ones(3)
    t_avg = torch.zeros(3)
    for _ in range(3):
        avg.lerp_(new, 0.1)
        t_avg.lerp_(torch.ones(3), 0.1)
    np.testing.assert_allclose(avg.numpy(), t_avg.numpy(), rtol=1e-7)


CLAMPS = [
    ("both", lambda x, lo, hi: sf.clamp(x, lo, hi), lambda x, lo, hi: torch.clamp(x, lo, hi)),
    ("method", lambda x, lo, hi: x.clamp(min=lo, max=hi),
     lambda x, lo, hi: x.clamp(min=lo, max=hi)),
    ("min_only", lambda x, lo, hi: sf.clamp(x, min=lo), lambda x, lo, hi: torch.clamp(x, min=lo)),
    ("max_only", lambda x, lo, hi: sf.clip(x, max=hi), lambda x, lo, hi: torch.clip(x, max=hi)),
    ("clamp_min", lambda x, lo, hi: sf.clamp_min(x, lo), lambda x, lo, hi: torch.clamp_min(x, lo)),
    ("clamp_max", lambda x, lo, hi: x.clamp_max(hi), lambda x, lo, hi: x.clamp_max(hi)),
]


@pytest.mark.parametrize("name,sf_fn,t_fn", CLAMPS, ids=[c[0] for c in CLAMPS])
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1))], ids=str)
def test_clamp_tensor_bounds(name, sf_fn, t_fn, shapes):
    sx, sl, sh = shapes
    x = normal(sx) * 2
    lo = -np.abs(normal(sl)) - 0.05
    hi = np.abs(normal(sh)) + 0.05
    check_op(sf_fn, t_fn, x, lo, hi)


def test_clamp_tensor_ties_and_crossed_bounds_as_pytorch():
    x, lo, hi = [1.0, 5.0, -3.0, 2.0, 4.0], [2.0, 0.0, 0.0, 2.0, 0.0], [3.0, 4.0, -1.0, 3.0, 4.0]
    s = [sf.tensor(v, requires_grad=True) for v in (x, lo, hi)]
    t = [torch.tensor(v, requires_grad=True) for v in (x, lo, hi)]
    sf.clamp(*s).sum().backward()
    torch.clamp(*t).sum().backward()
    for a, b in zip(s, t):
        assert a.grad.tolist() == b.grad.tolist()


def test_clamp_numbers_unchanged_and_inplace():
    x = sf.tensor([-2.0, 0.5, 3.0])
    assert sf.clamp(x, -1, 1).tolist() == [-1.0, 0.5, 1.0]
    y = sf.tensor([-2.0, 0.5, 3.0])
    y.clamp_(min=sf.tensor([0.0, 0.0, 0.0]), max=sf.tensor(1.0))
    assert y.tolist() == [0.0, 0.5, 1.0]
    z = sf.tensor([-2.0, 3.0])
    z.clamp_min_(0.0)
    z.clamp_max_(2.0)
    assert z.tolist() == [0.0, 2.0]


def test_clamp_meta():
    x = sf.empty(2, 3, device="meta")
    out = sf.clamp(x, sf.empty(3, device="meta"), sf.empty(2, 1, device="meta"))
    assert tuple(out.shape) == (2, 3) and out.device == "meta"


@pytest.mark.parametrize("value", [1, 0.5, -2])
def test_addcmul_addcdiv(value):
    check_op(lambda a, b, c: sf.addcmul(a, b, c, value=value),
             lambda a, b, c: torch.addcmul(a, b, c, value=value),
             normal((2, 3)), normal((3,)), normal((2, 1)))
    check_op(lambda a, b, c: a.addcdiv(b, c, value=value),
             lambda a, b, c: a.addcdiv(b, c, value=value),
             normal((2, 3)), normal((3,)), away_from_zero((2, 1)))


def test_addcmul_addcdiv_inplace_as_adam_does():
    p, m, v = (np.abs(normal((4,))).astype(np.float32) + 0.1 for _ in range(3))
    sp, sm, sv = sf.tensor(p), sf.tensor(m), sf.tensor(v)
    tp, tm, tv = torch.tensor(p), torch.tensor(m), torch.tensor(v)
    sv.mul_(0.9).addcmul_(sm, sm, value=0.1)
    tv.mul_(0.9).addcmul_(tm, tm, value=0.1)
    sp.addcdiv_(sm, sv.sqrt() + 1e-8, value=-0.01)
    tp.addcdiv_(tm, tv.sqrt() + 1e-8, value=-0.01)
    np.testing.assert_allclose(sp.numpy(), tp.numpy(), rtol=1e-6)
    with pytest.raises(sf.DTypeError, match="addcdiv"):
        sf.addcdiv(sf.tensor([1]), sf.tensor([1]), sf.tensor([2]))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3),
       st.lists(st.integers(1, 3), min_size=0, max_size=3))
def test_lerp_hypot_broadcast_like_torch(sa, sb):
    a, b = normal(tuple(sa)), normal(tuple(sb))
    try:
        want = torch.lerp(torch.from_numpy(a), torch.from_numpy(b), 0.25)
    except RuntimeError:
        with pytest.raises(sf.ShapeError):
            sf.lerp(sf.tensor(a), sf.tensor(b), 0.25)
        return
    np.testing.assert_allclose(sf.lerp(sf.tensor(a), sf.tensor(b), 0.25).numpy(), want.numpy())
    np.testing.assert_allclose(sf.hypot(sf.tensor(a), sf.tensor(b)).numpy(),
                               torch.hypot(torch.from_numpy(a), torch.from_numpy(b)).numpy())
