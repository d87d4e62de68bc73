"""sf.distributions against torch.distributions: densities, entropies, moments, KL, gradients."""

import math

import numpy as np
import pytest

import shapeflow as sf
import shapeflow.distributions as D

torch = pytest.importorskip("torch")
T = torch.distributions

RNG = np.random.default_rng(0)
LOC = RNG.normal(size=(2, 3))
POS = RNG.uniform(0.5, 3.0, size=(2, 3))
POS2 = RNG.uniform(0.5, 3.0, size=(2, 3))
PROBS = RNG.dirichlet(np.ones(4), size=3)  # (3, 4)
A = RNG.normal(size=(3, 3))
COV = A @ A.T + 3 * np.eye(3)


def _pair(name, params, **kw):
    """The same distribution in shapeflow and torch, float64 parameters."""
    sp = {k: sf.tensor(v) for k, v in params.items()}
    tp = {k: torch.tensor(v) for k, v in params.items()}
    return getattr(D, name)(**sp, **kw), getattr(T, name)(**tp, **kw)


def _close(a, b, rtol=1e-6, atol=1e-9):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


# name, parameters, values inside the support, which of cdf / icdf torch has
CASES = [
    ("Normal", {"loc": LOC, "scale": POS}, RNG.normal(size=(5, 2, 3)), "cdf icdf"),
    ("Laplace", {"loc": LOC, "scale": POS}, RNG.normal(size=(5, 2, 3)), "cdf icdf"),
    ("LogNormal", {"loc": LOC, "scale": POS}, RNG.uniform(0.1, 4, size=(5, 2, 3)), "cdf icdf"),
    ("Exponential", {"rate": POS}, RNG.uniform(0.1, 4, size=(5, 2, 3)), "cdf icdf"),
    ("Uniform", {"low": LOC, "high": LOC + POS}, LOC + POS * RNG.uniform(size=(5, 2, 3)),
     "cdf icdf"),
    ("Gamma", {"concentration": POS, "rate": POS2}, RNG.uniform(0.1, 4, size=(5, 2, 3)),
     "cdf"),
    ("Beta", {"concentration1": POS, "concentration0": POS2},
     RNG.uniform(0.05, 0.95, size=(5, 2, 3)), ""),
    ("Bernoulli", {"probs": RNG.uniform(0.05, 0.95, size=(2, 3))},
     RNG.integers(0, 2, size=(5, 2, 3)).astype(float), ""),
    ("Bernoulli", {"logits": LOC}, RNG.integers(0, 2, size=(5, 2, 3)).astype(float), ""),
    ("Categorical", {"probs": PROBS}, RNG.integers(0, 4, size=(5, 3)), ""),
    ("Categorical", {"logits": np.log(PROBS) + 1.5}, RNG.integers(0, 4, size=(5, 3)), ""),
    ("OneHotCategorical", {"probs": PROBS}, np.eye(4)[RNG.integers(0, 4, size=(5, 3))], ""),
    ("Dirichlet", {"concentration": POS}, RNG.dirichlet(np.ones(3), size=(5, 2)), ""),
    ("MultivariateNormal", {"loc": LOC, "covariance_matrix": COV}, RNG.normal(size=(5, 2, 3)),
     ""),
    ("MultivariateNormal", {"loc": LOC, "scale_tril": np.linalg.cholesky(COV)},
     RNG.normal(size=(5, 2, 3)), ""),
    ("MultivariateNormal", {"loc": LOC, "precision_matrix": np.linalg.inv(COV)},
     RNG.normal(size=(5, 2, 3)), ""),
]
IDS = [f"{c[0]}-{next(iter(c[1]))}" for c in CASES]


@pytest.mark.parametrize("name,params,values,has", CASES, ids=IDS)
def test_densities_entropy_and_moments_match_torch(name, params, values, has):
    s, t = _pair(name, params)
    assert s.batch_shape == tuple(t.batch_shape) and s.event_shape == tuple(t.event_shape)
    v = values.astype(np.int64) if name == "Categorical" else values
    _close(s.log_prob(sf.tensor(v)), t.log_prob(torch.tensor(v)))
    _close(s.entropy(), t.entropy())
    for moment in ("mean", "variance", "stddev", "mode"):
        if name in ("Categorical", "Uniform") and moment != "mode":
            continue
        _close(getattr(s, moment), getattr(t, moment))
    if "cdf" in has:
        _close(s.cdf(sf.tensor(values)), t.cdf(torch.tensor(values)))
    if "icdf" in has:
        q = RNG.uniform(0.02, 0.98, size=(5, 2, 3))
        _close(s.icdf(sf.tensor(q)), t.icdf(torch.tensor(q)))


@pytest.mark.parametrize("name,params,values,has", CASES, ids=IDS)
def test_log_prob_and_entropy_gradients_match_torch(name, params, values, has):
    if name in ("Categorical", "OneHotCategorical", "Bernoulli") and "probs" in params:
        params = dict(params)  # gradients through the normalization/clamp, as torch's
    sp = {k: sf.tensor(v, requires_grad=True) for k, v in params.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    s, t = getattr(D, name)(**sp), getattr(T, name)(**tp)
    v = values.astype(np.int64) if name == "Categorical" else values
    (s.log_prob(sf.tensor(v)).sum() + s.entropy().sum()).backward()
    (t.log_prob(torch.tensor(v)).sum() + t.entropy().sum()).backward()
    for k in params:
        _close(sp[k].grad, tp[k].grad, rtol=1e-6, atol=1e-8)


MOMENT_CASES = [
    ("Normal", {"loc": LOC, "scale": POS}),
    ("Laplace", {"loc": LOC, "scale": POS}),
    ("LogNormal", {"loc": LOC * 0.3, "scale": POS * 0.2}),
    ("Exponential", {"rate": POS}),
    ("Uniform", {"low": LOC, "high": LOC + POS}),
    ("Gamma", {"concentration": POS, "rate": POS2}),
    ("Beta", {"concentration1": POS, "concentration0": POS2}),
    ("Bernoulli", {"probs": RNG.uniform(0.05, 0.95, size=(2, 3))}),
    ("OneHotCategorical", {"probs": PROBS}),
    ("Dirichlet", {"concentration": POS}),
    ("MultivariateNormal", {"loc": LOC, "covariance_matrix": COV}),
]


@pytest.mark.parametrize("name,params", MOMENT_CASES, ids=[c[0] for c in MOMENT_CASES])
def test_samples_have_the_distributions_moments(name, params):
    sf.manual_seed(0)
    s, t = _pair(name, params)
    n = 20000
    x = s.sample((n,)).numpy()
    assert x.shape == (n, *t.batch_shape, *t.event_shape)
    mean, var = t.mean.numpy(), t.variance.numpy()
    se = np.sqrt(var / n)
    assert np.all(np.abs(x.mean(0) - mean) < 5 * se + 1e-12)
    # the sample variance's standard error: sqrt((m4 - var^2) / n), m4 estimated
    m4 = ((x - x.mean(0)) ** 4).mean(0)
    assert np.all(np.abs(x.var(0) - var) < 5 * np.sqrt(np.abs(m4 - var**2) / n) + 1e-12)


def test_categorical_samples_follow_probs_and_seed():
    sf.manual_seed(3)
    a = D.Categorical(sf.tensor(PROBS)).sample((20000,))
    sf.manual_seed(3)
    b = D.Categorical(sf.tensor(PROBS)).sample((20000,))
    assert a.shape == (20000, 3) and a.dtype == sf.int64
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    freq = np.stack([(a.numpy() == k).mean(0) for k in range(4)], -1)
    assert np.all(np.abs(freq - PROBS) < 5 * np.sqrt(PROBS * (1 - PROBS) / 20000))


@pytest.mark.parametrize("name,params", [
    ("Normal", {"loc": LOC, "scale": POS}), ("Laplace", {"loc": LOC, "scale": POS}),
    ("LogNormal", {"loc": LOC, "scale": POS}), ("Exponential", {"rate": POS}),
    ("Uniform", {"low": LOC, "high": LOC + POS}),
])
def test_rsample_gradients_equal_torchs_through_the_same_noise(name, params):
    """The same reparameterization: x = icdf(u), so d x / d param equals torch's icdf path,
    and our rsample's gradient equals the gradient of the formula at the drawn noise."""
    sf.manual_seed(1)
    sp = {k: sf.tensor(v, requires_grad=True) for k, v in params.items()}
    s = getattr(D, name)(**sp)
    x = s.rsample((4,))
    (x ** 2).sum().backward()
    # the noise as a uniform, read back through the cdf, then torch's icdf at that noise
    u = s.cdf(x.detach()).detach().numpy()
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    tx = getattr(T, name)(**tp).icdf(torch.tensor(u))
    _close(x, tx, rtol=1e-6)
    (tx ** 2).sum().backward()
    for k in params:
        _close(sp[k].grad, tp[k].grad, rtol=1e-5, atol=1e-8)


def test_mvn_rsample_gradient_is_the_scale_tril_path():
    sf.manual_seed(2)
    L = np.linalg.cholesky(COV)
    loc, tril = sf.tensor(LOC, requires_grad=True), sf.tensor(L, requires_grad=True)
    x = D.MultivariateNormal(loc, scale_tril=tril).rsample((5,))
    (x ** 3).sum().backward()
    eps = np.linalg.solve(L, (x.detach().numpy() - LOC)[..., None])[..., 0]  # the noise drawn
    tl, tt = torch.tensor(LOC, requires_grad=True), torch.tensor(L, requires_grad=True)
    tx = tl + (tt @ torch.tensor(eps)[..., None])[..., 0]
    (tx ** 3).sum().backward()
    _close(x, tx)
    _close(loc.grad, tl.grad)
    _close(tril.grad, tt.grad, rtol=1e-6)


def test_gamma_rsample_gradient_is_torchs_implicit_gradient():
    sf.manual_seed(4)
    conc = np.array([0.05, 0.3, 1.0, 2.5, 9.0, 60.0])
    c = sf.tensor(conc, requires_grad=True)
    x = D.Gamma(c, 1.0).rsample((200,))
    x.sum().backward()
    want = torch._standard_gamma_grad(torch.tensor(conc).expand(200, 6),
                                      torch.tensor(x.detach().numpy())).sum(0)
    # torch's is an approximation good to ~1e-3; ours differentiates the CDF numerically
    np.testing.assert_allclose(c.grad.numpy(), want.numpy(), rtol=2e-3)


def test_gamma_beta_dirichlet_rsample_gradients_have_the_right_mean():
    """d E[x] / d param by pathwise gradients equals the derivative of the mean formula."""
    sf.manual_seed(5)
    n = 20000
    a, r = sf.tensor([0.7, 3.0], requires_grad=True), sf.tensor([1.5, 0.5], requires_grad=True)
    D.Gamma(a, r).rsample((n,)).mean(0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 1 / np.array([1.5, 0.5]), rtol=0.05)
    np.testing.assert_allclose(r.grad.numpy(), -np.array([0.7, 3.0]) / np.array([1.5, .5])**2,
                               rtol=0.05)
    a, b = sf.tensor(2.0, requires_grad=True), sf.tensor(3.0, requires_grad=True)
    D.Beta(a, b).rsample((n,)).mean().backward()
    np.testing.assert_allclose([a.grad.item(), b.grad.item()], [3 / 25, -2 / 25], rtol=0.05)
    c = sf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    D.Dirichlet(c).rsample((n,))[:, 0].mean().backward()
    np.testing.assert_allclose(c.grad.numpy(), [5 / 36, -1 / 36, -1 / 36], rtol=0.08,
                               atol=2e-3)


KL_PAIRS = [
    ("Normal", {"loc": LOC, "scale": POS}, {"loc": LOC[::-1].copy(), "scale": POS2}),
    ("Laplace", {"loc": LOC, "scale": POS}, {"loc": LOC[::-1].copy(), "scale": POS2}),
    ("Exponential", {"rate": POS}, {"rate": POS2}),
    ("Gamma", {"concentration": POS, "rate": POS2}, {"concentration": POS2, "rate": POS}),
    ("Beta", {"concentration1": POS, "concentration0": POS2},
     {"concentration1": POS2, "concentration0": POS}),
    ("Dirichlet", {"concentration": POS}, {"concentration": POS2}),
    ("Uniform", {"low": LOC, "high": LOC + POS}, {"low": LOC - 1, "high": LOC + POS2 + 1}),
    ("Uniform", {"low": LOC, "high": LOC + POS}, {"low": LOC + 0.1, "high": LOC + POS2}),
    ("Bernoulli", {"probs": PROBS[:2, :3]}, {"probs": PROBS[1:, 1:]}),
    ("Categorical", {"probs": PROBS}, {"logits": np.log(PROBS[::-1].copy())}),
    ("OneHotCategorical", {"probs": PROBS}, {"probs": PROBS[::-1].copy()}),
    ("MultivariateNormal", {"loc": LOC, "covariance_matrix": COV},
     {"loc": LOC[::-1].copy(), "scale_tril": np.linalg.cholesky(COV + np.eye(3))}),
    ("LogNormal", {"loc": LOC, "scale": POS}, {"loc": LOC[::-1].copy(), "scale": POS2}),
]


@pytest.mark.parametrize("name,p,q", KL_PAIRS, ids=[k[0] for k in KL_PAIRS])
def test_kl_divergence_matches_torch(name, p, q):
    sp, tp = _pair(name, p)
    sq, tq = _pair(name, q)
    _close(D.kl_divergence(sp, sq), T.kl_divergence(tp, tq))


def test_kl_independent_and_mixed_pairs_and_register_kl():
    sp, tp = _pair("Normal", {"loc": LOC, "scale": POS})
    sq, tq = _pair("Laplace", {"loc": LOC, "scale": POS2})
    _close(D.kl_divergence(sp, sq), T.kl_divergence(tp, tq))
    si = D.kl_divergence(D.Independent(sp, 1), D.Independent(_pair("Normal", {
        "loc": LOC + 1, "scale": POS2})[0], 1))
    ti = T.kl_divergence(T.Independent(tp, 1), T.Independent(T.Normal(
        torch.tensor(LOC + 1), torch.tensor(POS2)), 1))
    assert si.shape == (2,)
    _close(si, ti)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(sp, D.Gamma(1.0, 1.0))

    class MyNormal(D.Normal):
        pass

    @D.register_kl(MyNormal, D.Normal)
    def _kl(p, q):
        return p.loc * 0 + 42.0

    assert float(D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(0.0, 2.0))) == 42.0
    assert float(D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 1.0))) == 0.0


def test_kl_gradients_match_torch():
    p = {k: sf.tensor(v, requires_grad=True) for k, v in {"loc": LOC, "scale": POS}.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in {"loc": LOC, "scale": POS}.items()}
    D.kl_divergence(D.Normal(**p), D.Normal(0.0, 1.0)).sum().backward()
    T.kl_divergence(T.Normal(**tp), T.Normal(torch.tensor(0.0, dtype=torch.float64),
                                             torch.tensor(1.0, dtype=torch.float64))
                    ).sum().backward()
    _close(p["loc"].grad, tp["loc"].grad)
    _close(p["scale"].grad, tp["scale"].grad)


def test_shapes_broadcasting_expand_and_independent():
    d = D.Normal(0.0, 1.0)
    assert d.batch_shape == () and d.event_shape == () and d.sample().shape == ()
    assert d.loc.dtype == sf.float32 and d.sample((4, 2)).shape == (4, 2)
    d = D.Normal(sf.zeros(3, 1), sf.ones(4))  # parameters broadcast
    assert d.batch_shape == (3, 4) and d.rsample((2,)).shape == (2, 3, 4)
    e = d.expand((5, 3, 4))
    assert e.batch_shape == (5, 3, 4) and e.log_prob(sf.zeros(5, 3, 4)).shape == (5, 3, 4)
    ind = D.Independent(D.Normal(sf.zeros(5, 3), sf.ones(5, 3)), 1)
    t = T.Independent(T.Normal(torch.zeros(5, 3), torch.ones(5, 3)), 1)
    assert ind.batch_shape == (5,) and ind.event_shape == (3,)
    v = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    _close(ind.log_prob(sf.tensor(v)), t.log_prob(torch.tensor(v)), rtol=1e-6)
    _close(ind.entropy(), t.entropy(), rtol=1e-6)
    assert ind.sample((2,)).shape == (2, 5, 3)
    assert ind.expand((7, 5)).batch_shape == (7, 5)
    c = D.Categorical(logits=sf.zeros(2, 3, 6))
    assert c.batch_shape == (2, 3) and c.sample((4,)).shape == (4, 2, 3)
    assert tuple(c.enumerate_support().shape) == (6, 2, 3)
    oh = D.OneHotCategorical(logits=sf.zeros(2, 6))
    assert oh.event_shape == (6,) and oh.sample((3,)).shape == (3, 2, 6)
    m = D.MultivariateNormal(sf.zeros(4, 1, 3), scale_tril=sf.eye(3).expand(2, 3, 3))
    assert m.batch_shape == (4, 2) and m.rsample((5,)).shape == (5, 4, 2, 3)
    assert m.expand((6, 4, 2)).log_prob(sf.zeros(3)).shape == (6, 4, 2)


def test_transformed_distributions_match_torch():
    tr = [D.AffineTransform(0.5, 2.0), D.TanhTransform(), D.ExpTransform(),
          D.PowerTransform(1.5), D.SigmoidTransform()]
    tt = [T.AffineTransform(0.5, 2.0), T.TanhTransform(), T.ExpTransform(),
          T.PowerTransform(1.5), T.SigmoidTransform()]
    s = D.TransformedDistribution(D.Normal(sf.tensor(LOC), sf.tensor(POS)), tr)
    t = T.TransformedDistribution(T.Normal(torch.tensor(LOC), torch.tensor(POS)), tt)
    x = np.linspace(-0.9, 0.9, 6).reshape(2, 3)
    y = t.transforms[-1](t.transforms[-2](t.transforms[-3](torch.tensor(x).tanh())))
    _close(s.log_prob(sf.tensor(y.numpy())), t.log_prob(y), rtol=1e-6)
    _close(s.cdf(sf.tensor(y.numpy())), t.cdf(y), rtol=1e-6)
    q = np.full((2, 3), 0.3)
    _close(s.icdf(sf.tensor(q)), t.icdf(torch.tensor(q)), rtol=1e-6)
    neg = D.TransformedDistribution(D.Exponential(sf.tensor(POS)), D.AffineTransform(1.0, -2.0))
    tneg = T.TransformedDistribution(T.Exponential(torch.tensor(POS)), T.AffineTransform(1.0, -2.0))
    _close(neg.cdf(sf.tensor(-LOC ** 2)), tneg.cdf(torch.tensor(-LOC ** 2)))
    comp = D.ComposeTransform([D.ExpTransform(), D.AffineTransform(1.0, 3.0)])
    tcomp = T.ComposeTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0)])
    xv = sf.tensor(LOC)
    _close(comp.log_abs_det_jacobian(xv, comp(xv)),
           tcomp.log_abs_det_jacobian(torch.tensor(LOC), tcomp(torch.tensor(LOC))))
    _close(comp.inv(comp(xv)), torch.tensor(LOC))
    sm = D.SoftmaxTransform()(sf.tensor(LOC))
    _close(sm, T.SoftmaxTransform()(torch.tensor(LOC)))
    ind = D.TransformedDistribution(D.Normal(sf.zeros(2, 3), sf.ones(2, 3)),
                                    D.AffineTransform(sf.zeros(3), sf.tensor([1.0, 2, 3]), 1))
    assert ind.batch_shape == (2,) and ind.event_shape == (3,)
    tind = T.TransformedDistribution(T.Normal(torch.zeros(2, 3), torch.ones(2, 3)),
                                     T.AffineTransform(torch.zeros(3), torch.tensor([1.0, 2, 3]),
                                                       1))
    _close(ind.log_prob(sf.ones(2, 3)), tind.log_prob(torch.ones(2, 3)), rtol=1e-6)


def test_validation_errors_are_shapeflow_value_errors_with_torchs_words():
    with pytest.raises(ValueError, match="Expected parameter scale .* to satisfy the "
                                         "constraint GreaterThan"):
        D.Normal(sf.zeros(2), sf.tensor([1.0, -1.0]))
    with pytest.raises(sf.ShapeflowError, match="Expected parameter probs"):
        D.Bernoulli(probs=sf.tensor([1.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical(probs=sf.ones(3), logits=sf.ones(3))
    with pytest.raises(ValueError, match="Expected parameter covariance_matrix"):
        D.MultivariateNormal(sf.zeros(2), sf.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Expected parameter low"):
        D.Uniform(sf.tensor([2.0]), sf.tensor([1.0]))
    with pytest.raises(ValueError, match="to be within the support"):
        D.Exponential(1.0).log_prob(sf.tensor([-1.0]))
    with pytest.raises(ValueError, match="within the support .*IntegerInterval"):
        D.Categorical(probs=sf.ones(3)).log_prob(sf.tensor([3]))
    with pytest.raises(ValueError, match="must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match="not broadcastable"):
        D.Normal(sf.zeros(3), sf.ones(3)).log_prob(sf.zeros(2))
    with pytest.raises(ValueError, match="right-most size of value must match event_shape"):
        D.Dirichlet(sf.ones(3)).log_prob(sf.ones(2) / 2)
    # validate_args=False lets them through, as torch does
    lp = D.Exponential(1.0, validate_args=False).log_prob(sf.tensor([-1.0]))
    assert float(lp[0]) == 1.0


def test_bernoulli_and_categorical_parametrizations_agree():
    p = sf.tensor([0.2, 0.7])
    a, b = D.Bernoulli(probs=p), D.Bernoulli(logits=sf.logit(p))
    _close(a.logits, b.logits, rtol=1e-5)
    _close(b.probs, a.probs, rtol=1e-6)
    c = D.Categorical(probs=sf.tensor([1.0, 3.0]))  # normalized, as torch
    _close(c.probs, torch.tensor([0.25, 0.75]))
    _close(c.logits, torch.tensor([0.25, 0.75]).log(), rtol=1e-6)
    assert math.isnan(float(D.Bernoulli(0.5).mode))


def test_modes_at_concentrations_below_one_are_torchs():
    c = np.array([[0.5, 0.3, 0.4], [0.5, 2.0, 0.5]])
    _close(D.Dirichlet(sf.tensor(c)).mode, T.Dirichlet(torch.tensor(c)).mode)
    a, b = np.array([0.5, 0.5, 2.0]), np.array([0.5, 2.0, 0.5])
    _close(D.Beta(sf.tensor(a), sf.tensor(b)).mode, T.Beta(torch.tensor(a), torch.tensor(b)).mode)
