"""Special functions vs PyTorch: erf, erfc, erfinv, lgamma, digamma, sinc, logit, xlogy,
nan_to_num (values, grads, float64 gradcheck, meta), and the float64 kernels' accuracy."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import shapeflow as sf
from shapeflow.ops.elementwise import special_kernels as K
from tests.ops.harness import check_op

rng = np.random.default_rng(0)
SHAPES = [(5,), (2, 3), (2, 1, 4), ()]


def normal(shape):
    return np.asarray(rng.standard_normal(shape) * 1.5)


def positive(shape):
    return np.asarray(rng.uniform(0.3, 6.0, size=shape))


def unit(shape):
    return np.asarray(rng.uniform(-0.95, 0.95, size=shape))


def prob(shape):
    return np.asarray(rng.uniform(0.05, 0.95, size=shape))


UNARY = [
    ("erf", sf.erf, torch.erf, normal),
    ("erfc", sf.erfc, torch.erfc, normal),
    ("erfinv", sf.erfinv, torch.erfinv, unit),
    ("lgamma", sf.lgamma, torch.lgamma, positive),
    ("digamma", sf.digamma, torch.digamma, positive),
    ("sinc", sf.sinc, torch.sinc, normal),
    ("logit", sf.logit, torch.logit, prob),
    ("logit_eps", lambda x: sf.logit(x, eps=0.2), lambda x: torch.logit(x, eps=0.2), prob),
    ("method_erf", lambda x: x.erf(), lambda x: x.erf(), normal),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,make", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unary(name, sf_fn, t_fn, make, shape):
    check_op(sf_fn, t_fn, make(shape), rtol=2e-5, atol=2e-6)


def test_digamma_negative_and_lgamma_negative():
    x = np.array([-0.5, -1.3, -2.7, 0.2, 12.5])
    check_op(sf.digamma, torch.digamma, x, rtol=1e-4, atol=1e-5)
    check_op(sf.lgamma, torch.lgamma, x, rtol=1e-5)


def test_sinc_at_zero_has_gradient_zero():
    x = sf.tensor([0.0, 0.5], requires_grad=True)
    y = sf.sinc(x)
    y.sum().backward()
    assert y.detach().numpy()[0] == 1.0 and x.grad.numpy()[0] == 0.0


def test_special_values_match_torch():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, -2.0, 30.0, -30.0, 1e-300],
                 np.float64)
    for sf_fn, t_fn in [(sf.erf, torch.erf), (sf.erfc, torch.erfc), (sf.lgamma, torch.lgamma),
                        (sf.digamma, torch.digamma), (sf.sinc, torch.sinc)]:
        got = sf_fn(sf.tensor(x)).numpy()
        want = t_fn(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, equal_nan=True,
                                   err_msg=sf_fn.__name__)
    y = np.array([-1.0, 1.0, 0.0, 1.5, -2.0, np.nan, 0.999999, -0.3], np.float64)
    np.testing.assert_allclose(sf.erfinv(sf.tensor(y)).numpy(),
                               torch.erfinv(torch.from_numpy(y)).numpy(), rtol=1e-13,
                               equal_nan=True)


def test_kernels_are_float64_accurate():
    x = np.concatenate([rng.standard_normal(3000) * 3, rng.uniform(-30, 30, 1000),
                        [0.84375, 1.25, 1 / 0.35, 6.0, 27.9, 28.0]])
    erf = np.array([math.erf(v) for v in x])
    erfc = np.array([math.erfc(v) for v in x])
    assert np.max(np.abs(K.erf(x) - erf) / np.spacing(np.abs(erf) + 1e-300)) <= 1.0
    np.testing.assert_allclose(K.erfc(x), erfc, rtol=2e-15, atol=0)
    y = np.concatenate([rng.uniform(-1, 1, 3000), [1 - 1e-15, -1 + 1e-12, 0.7, 1e-10]])
    # erf(erfinv(y)) == y to rounding; near +-1 compare through erfc
    xi = K.erfinv(y)
    np.testing.assert_allclose(K.erf(xi), y, rtol=4e-16, atol=2e-16)
    far = np.abs(y) > 0.9
    np.testing.assert_allclose(K.erfc(np.abs(xi[far])), 1 - np.abs(y[far]), rtol=1e-13)
    z = rng.uniform(0.01, 40, 2000)
    np.testing.assert_allclose(K.digamma(z), torch.digamma(torch.from_numpy(z)).numpy(),
                               rtol=1e-13, atol=1e-14)
    # torch's polygamma(1, .) is good to ~1e-9 only: mpmath is the oracle here
    mpmath = pytest.importorskip("mpmath")
    z = z[:200]
    want = np.array([float(mpmath.polygamma(1, v)) for v in z])
    np.testing.assert_allclose(K.trigamma(z), want, rtol=2e-12)


def test_float32_and_int_inputs():
    x = sf.tensor([1, 2, 3])
    assert sf.erf(x).dtype is sf.float32 and sf.lgamma(x).dtype is sf.float32
    h = sf.tensor([0.5, 1.5], dtype=sf.bfloat16)
    assert sf.erf(h).dtype is sf.bfloat16
    np.testing.assert_allclose(sf.erf(h).float().numpy(), [0.5205, 0.9661], rtol=1e-2)


XLOGY = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((), (3,))]


@pytest.mark.parametrize("sa,sb", XLOGY, ids=str)
def test_xlogy(sa, sb):
    check_op(sf.xlogy, torch.xlogy, normal(sa), positive(sb))


def test_xlogy_zero_and_numbers():
    x = sf.tensor([0.0, 0.0, 2.0, 0.0])
    y = sf.tensor([0.0, -1.0, 3.0, float("nan")])
    want = torch.xlogy(torch.tensor([0.0, 0.0, 2.0, 0.0]),
                       torch.tensor([0.0, -1.0, 3.0, float("nan")]))
    np.testing.assert_allclose(sf.xlogy(x, y).numpy(), want.numpy(), equal_nan=True)
    np.testing.assert_allclose(sf.xlogy(2, sf.tensor([3.0])).numpy(),
                               torch.xlogy(2, torch.tensor([3.0])).numpy())
    np.testing.assert_allclose(sf.xlogy(sf.tensor([3.0]), 2).numpy(),
                               torch.xlogy(torch.tensor([3.0]), 2).numpy())
    a = sf.tensor([0.0, 1.0], requires_grad=True)
    sf.xlogy(a, sf.tensor([0.0, 2.0])).sum().backward()
    t = torch.tensor([0.0, 1.0], requires_grad=True)
    torch.xlogy(t, torch.tensor([0.0, 2.0])).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())


def test_nan_to_num():
    vals = [float("nan"), float("inf"), -float("inf"), 1.5]
    for kw in [{}, {"nan": 2.0}, {"nan": 1.0, "posinf": 9.0, "neginf": -9.0}]:
        for dt, tdt in [(sf.float32, torch.float32), (sf.float64, torch.float64),
                        (sf.float16, torch.float16)]:
            got = sf.nan_to_num(sf.tensor(vals, dtype=dt), **kw)
            want = torch.nan_to_num(torch.tensor(vals, dtype=tdt), **kw)
            assert got.dtype is dt
            np.testing.assert_array_equal(got.numpy().astype(np.float64),
                                          want.numpy().astype(np.float64))
    ints = sf.tensor([1, 2])
    assert sf.nan_to_num(ints).tolist() == [1, 2]
    x = np.array([1.0, 2.0, -0.5])
    check_op(sf.nan_to_num, torch.nan_to_num, x)
    x = sf.tensor(vals, requires_grad=True)
    sf.nan_to_num(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0, 1.0]


def test_inplace_variants():
    for name in ["erf_", "erfc_", "erfinv_", "lgamma_", "digamma_", "sinc_", "logit_",
                 "nan_to_num_"]:
        a = np.array([0.3, 0.6], np.float32)
        s, t = sf.tensor(a.copy()), torch.tensor(a.copy())
        assert getattr(s, name)() is s
        getattr(t, name)()
        np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-6, err_msg=name)
    s, t = sf.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    s.xlogy_(sf.tensor([3.0, 4.0]))
    t.xlogy_(torch.tensor([3.0, 4.0]))
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-6)
    assert sf.erf_ is not None and sf.xlogy_ is not None


def test_grad_of_grad_erf():
    x = sf.tensor([0.3, -0.7], dtype=sf.float64, requires_grad=True)
    t = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    (gx,) = sf.autograd.grad(sf.erf(x).sum(), x, create_graph=True)
    (gt,) = torch.autograd.grad(torch.erf(t).sum(), t, create_graph=True)
    gx.sum().backward()
    gt.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=4),
                  elements=st.floats(-6, 6)))
def test_erf_erfc_any_shape(x):
    np.testing.assert_allclose(sf.erf(sf.tensor(x)).numpy(), torch.erf(torch.from_numpy(x)),
                               rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(sf.erfc(sf.tensor(x)).numpy(),
                               torch.erfc(torch.from_numpy(x)), rtol=1e-14, atol=1e-300)
