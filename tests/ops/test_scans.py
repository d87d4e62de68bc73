"""cumprod (gradient exact with zeros), cummax, cummin, logcumsumexp and diff vs PyTorch."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(3)


def normal(*shape):
    return np.asarray(rng.standard_normal(shape))


CASES = [
    ("cumprod", lambda x: sf.cumprod(x, 1), lambda x: torch.cumprod(x, 1), (3, 4)),
    ("cumprod_neg", lambda x: x.cumprod(-1), lambda x: x.cumprod(-1), (2, 3, 4)),
    ("cumprod_0d", lambda x: x.cumprod(0), lambda x: x.cumprod(0), ()),
    ("cummax", lambda x: sf.cummax(x, 1), lambda x: torch.cummax(x, 1), (3, 5)),
    ("cummin", lambda x: x.cummin(0), lambda x: x.cummin(0), (4, 2)),
    ("logcumsumexp", lambda x: sf.logcumsumexp(x, 1), lambda x: torch.logcumsumexp(x, 1),
     (3, 4)),
    ("logcumsumexp_0", lambda x: x.logcumsumexp(0), lambda x: x.logcumsumexp(0), (5,)),
    ("diff", sf.diff, torch.diff, (3, 5)),
    ("diff_n2_dim0", lambda x: x.diff(2, 0), lambda x: x.diff(2, 0), (5, 2)),
    ("diff_n_big", lambda x: sf.diff(x, 4), lambda x: torch.diff(x, 4), (2, 3)),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,shape", CASES, ids=[c[0] for c in CASES])
def test_against_torch(name, sf_fn, t_fn, shape):
    x = normal(*shape)
    check_op(sf_fn, t_fn, x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("zeros", [[1], [0], [3], [1, 3], [0, 0]], ids=str)
def test_cumprod_gradient_with_zeros(zeros):
    x = normal(3, 4) + 2
    x[1, zeros] = 0.0
    x[2, zeros[0]] = 0.0
    xs = sf.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    g = normal(3, 4)
    (sf.cumprod(xs, 1) * sf.tensor(g)).sum().backward()
    (torch.cumprod(xt, 1) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    # and along another dim, and against finite differences
    xs.grad = None
    assert sf.autograd.gradcheck(lambda a: sf.cumprod(a, 1), [xs])
    xd = sf.tensor(x.T.copy(), requires_grad=True)
    assert sf.autograd.gradcheck(lambda a: sf.cumprod(a, 0), [xd])


def test_cummax_ties_and_nan_as_pytorch():
    v = [1.0, 3.0, 3.0, 2.0, 5.0, float("nan"), 1.0, float("nan")]
    for fn in ("cummax", "cummin"):
        s = getattr(sf, fn)(sf.tensor(v), 0)
        t = getattr(torch, fn)(torch.tensor(v), 0)
        np.testing.assert_array_equal(s.values.numpy(), t.values.numpy())
        assert s.indices.tolist() == t.indices.tolist()
        assert s.indices.dtype is sf.int64
    ints = sf.cummax(sf.tensor([2, 1, 4]), 0)
    assert ints.values.tolist() == [2, 2, 4] and ints.indices.tolist() == [0, 0, 2]


def test_logcumsumexp_is_stable():
    x = np.array([-1000.0, 0.0, 1000.0, 1000.0])
    s = sf.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    out_s, out_t = sf.logcumsumexp(s, 0), torch.logcumsumexp(t, 0)
    np.testing.assert_allclose(out_s.detach().numpy(), out_t.detach().numpy())
    w = np.array([1.0, -2.0, 0.5, 3.0])
    (out_s * sf.tensor(w)).sum().backward()
    (out_t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), atol=1e-12)


def test_diff_prepend_append_and_bool():
    x = normal(2, 4)
    check_op(lambda a, p, q: sf.diff(a, 1, -1, p, q),
             lambda a, p, q: torch.diff(a, 1, -1, p, q), x, normal(2, 1), normal(2, 2))
    b = [True, False, False, True]
    assert sf.diff(sf.tensor(b)).tolist() == torch.diff(torch.tensor(b)).tolist()
    assert sf.tensor([1, 4, 9]).diff().tolist() == [3, 5]
    with pytest.raises(sf.ShapeError):
        sf.diff(sf.tensor(1.0))


def test_meta_shapes():
    m = sf.zeros(2, 5, device="meta")
    assert tuple(sf.cumprod(m, 1).shape) == (2, 5)
    assert tuple(sf.cummax(m, 0).indices.shape) == (2, 5)
    assert tuple(sf.diff(m, 2).shape) == (2, 3)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_scans_any_shape(shape, data):
    x = normal(*shape).round(1)  # ties and zeros appear
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    s, t = sf.tensor(x), torch.from_numpy(x)
    np.testing.assert_allclose(sf.cumprod(s, dim).numpy(), torch.cumprod(t, dim).numpy())
    for fn in ("cummax", "cummin"):
        a, b = getattr(sf, fn)(s, dim), getattr(torch, fn)(t, dim)
        np.testing.assert_array_equal(a.values.numpy(), b.values.numpy())
        np.testing.assert_array_equal(a.indices.numpy(), b.indices.numpy())
    np.testing.assert_allclose(sf.logcumsumexp(s, dim).numpy(),
                               torch.logcumsumexp(t, dim).numpy(), rtol=1e-12)


def test_cumprod_inplace():
    x = sf.tensor([[1.0, 2.0, 3.0]])
    assert x.cumprod_(1) is x and x.tolist() == [[1.0, 2.0, 6.0]]
