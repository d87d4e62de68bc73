"""Sampling ops, tested statistically: chi-square and Kolmogorov-Smirnov tests.

Each test draws with a fixed seed and rejects at ALPHA = 1e-3: a correct sampler fails a
given test with probability 1e-3 over seeds, so with the seed fixed the suite is
deterministic, and a change of seed would turn a pass into a failure about once in a
thousand tests. The p-values come from torch.special.gammaincc (no scipy here).
"""

import math

import numpy as np
import pytest
import torch

import shapeflow as sf

ALPHA = 1e-3
KS_C = 1.949  # Kolmogorov's c(alpha) for alpha = 1e-3: reject if sqrt(n) * D > c


def chi2_pvalue(observed, expected) -> float:
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    keep = expected > 0
    assert observed[~keep].sum() == 0, "draws landed on a category of probability 0"
    stat = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    df = keep.sum() - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2.0, dtype=torch.float64),
                                         torch.tensor(stat / 2.0, dtype=torch.float64)))


def ks_passes(samples, cdf) -> bool:
    x = np.sort(np.asarray(samples, float).ravel())
    n = x.size
    f = cdf(x)
    d = max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max())
    return math.sqrt(n) * d < KS_C


def normal_cdf(mean=0.0, std=1.0):
    return lambda x: 0.5 * (1 + np.vectorize(math.erf)((x - mean) / (std * math.sqrt(2))))


@pytest.fixture(autouse=True)
def seeded():
    sf.manual_seed(1234)


def test_multinomial_with_replacement_follows_the_weights():
    w = np.array([1.0, 0.0, 3.0, 6.0, 0.5])
    out = sf.multinomial(sf.tensor(w), 20000, replacement=True)
    assert out.dtype is sf.int64 and tuple(out.shape) == (20000,)
    counts = np.bincount(out.numpy(), minlength=5)
    assert chi2_pvalue(counts, 20000 * w / w.sum()) > ALPHA


def test_multinomial_rows_are_independent_distributions():
    w = np.array([[1.0, 1.0, 2.0], [0.0, 5.0, 1.0]])
    out = sf.multinomial(sf.tensor(w, dtype=sf.float32), 6000, True).numpy()
    assert out.shape == (2, 6000)
    for r in range(2):
        counts = np.bincount(out[r], minlength=3)
        assert chi2_pvalue(counts, 6000 * w[r] / w[r].sum()) > ALPHA


def test_multinomial_without_replacement_draws_distinct_categories():
    w = sf.tensor([[0.2, 0.0, 0.3, 0.5, 1.0]] * 200)
    out = sf.multinomial(w, 4).numpy()
    assert all(len(set(row)) == 4 and 1 not in row for row in out)


def test_multinomial_without_replacement_first_draw_and_pairs():
    # first draw ~ the weights; the second, given the first, ~ the rest renormalized
    w = np.array([1.0, 2.0, 3.0, 4.0])
    out = sf.multinomial(sf.tensor(w).expand(20000, 4).contiguous(), 2).numpy()
    first = np.bincount(out[:, 0], minlength=4)
    assert chi2_pvalue(first, 20000 * w / w.sum()) > ALPHA
    pairs = np.bincount(out[:, 0] * 4 + out[:, 1], minlength=16)
    p = np.array([w[i] / w.sum() * (w[j] / (w.sum() - w[i]) if i != j else 0)
                  for i in range(4) for j in range(4)])
    assert chi2_pvalue(pairs, 20000 * p) > ALPHA


def test_multinomial_is_reproducible_from_manual_seed_and_generator():
    w = sf.tensor([0.3, 0.3, 0.4])
    sf.manual_seed(7)
    a = sf.multinomial(w, 50, True)
    sf.manual_seed(7)
    b = w.multinomial(50, True)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    g1, g2 = sf.Generator().manual_seed(3), sf.Generator().manual_seed(3)
    np.testing.assert_array_equal(sf.multinomial(w, 3, generator=g1).numpy(),
                                  sf.multinomial(w, 3, generator=g2).numpy())


@pytest.mark.parametrize("w,k,kw,err,match", [
    ([1.0, -1.0], 1, {}, "DistributionError", "element < 0"),
    ([1.0, float("nan")], 1, {}, "DistributionError", "inf, nan"),
    ([0.0, 0.0], 1, {"replacement": True}, "DistributionError", "sum of probabilities"),
    ([1.0, 0.0, 0.0], 2, {}, "DistributionError", "not enough"),
    ([1.0, 2.0], 3, {}, "ShapeError", "n_sample \\(3\\) > prob_dist.size\\(-1\\) \\(2\\)"),
    ([[[1.0]]], 1, {}, "ShapeError", "1 or 2 dim"),
])
def test_multinomial_errors(w, k, kw, err, match):
    from shapeflow.ops.sampling import DistributionError

    cls = DistributionError if err == "DistributionError" else sf.ShapeError
    with pytest.raises(cls, match=match) as info:
        sf.multinomial(sf.tensor(w), k, **kw)
    assert info.value.op == "multinomial"
    assert isinstance(info.value, (ValueError, RuntimeError))


def test_multinomial_on_meta_and_int_input():
    out = sf.multinomial(sf.zeros(3, 10, device="meta"), 4)
    assert tuple(out.shape) == (3, 4) and out.dtype is sf.int64 and out.device == "meta"
    with pytest.raises(sf.DTypeError, match="multinomial"):
        sf.multinomial(sf.tensor([1, 2]), 1)
    with pytest.raises(sf.ShapeError):
        sf.multinomial(sf.zeros(10, device="meta"), 11)


def test_bernoulli_follows_p():
    p = sf.tensor([0.1, 0.5, 0.9]).expand(10000, 3).contiguous()
    out = sf.bernoulli(p).numpy()
    assert out.dtype == np.float32 and set(np.unique(out)) <= {0.0, 1.0}
    for j, q in enumerate([0.1, 0.5, 0.9]):
        ones = out[:, j].sum()
        assert chi2_pvalue([ones, 10000 - ones], [10000 * q, 10000 * (1 - q)]) > ALPHA
    scalar = sf.bernoulli(sf.zeros(10000), 0.25).numpy()
    assert chi2_pvalue([scalar.sum(), 10000 - scalar.sum()], [2500, 7500]) > ALPHA
    with pytest.raises(ValueError, match="bernoulli"):
        sf.bernoulli(sf.tensor([1.5]))


def test_normal_overloads():
    a = sf.normal(sf.full((20000,), 2.0), 3.0)
    assert ks_passes(a.numpy(), normal_cdf(2.0, 3.0))
    b = sf.normal(-1.0, sf.full((20000,), 0.5))
    assert ks_passes(b.numpy(), normal_cdf(-1.0, 0.5))
    c = sf.normal(sf.zeros(2, 1), sf.ones(1, 3))
    assert tuple(c.shape) == (2, 3)
    d = sf.normal(1.0, 2.0, (20000,))
    assert d.dtype is sf.float32 and ks_passes(d.numpy(), normal_cdf(1.0, 2.0))
    m = sf.normal(sf.zeros(4, device="meta"), 1.0)
    assert m.device == "meta" and tuple(m.shape) == (4,)
    with pytest.raises(sf.ShapeError):
        sf.normal(sf.zeros(2), sf.ones(3))
    with pytest.raises(ValueError, match="std"):
        sf.normal(0.0, -1.0, (2,))


def test_samples_carry_no_gradient():
    mean = sf.zeros(3, requires_grad=True)
    out = sf.normal(mean, 1.0)
    assert not out.requires_grad


def test_poisson():
    rate = 3.5
    out = sf.poisson(sf.full((20000,), rate)).numpy().astype(int)
    counts = np.bincount(out, minlength=20)[:12]
    pmf = np.array([math.exp(-rate) * rate ** k / math.factorial(k) for k in range(12)])
    observed = np.append(counts[:11], out.size - counts[:11].sum())
    expected = np.append(20000 * pmf[:11], 20000 * (1 - pmf[:11].sum()))
    assert chi2_pvalue(observed, expected) > ALPHA


def test_inplace_fills():
    t = sf.empty(20000)
    assert t.uniform_(2, 5) is t
    assert ks_passes(t.numpy(), lambda x: np.clip((x - 2) / 3, 0, 1))
    t.normal_(1.0, 0.5)
    assert ks_passes(t.numpy(), normal_cdf(1.0, 0.5))
    t.exponential_(2.0)
    assert ks_passes(t.numpy(), lambda x: 1 - np.exp(-2.0 * x))
    t.bernoulli_(0.3)
    ones = t.numpy().sum()
    assert chi2_pvalue([ones, 20000 - ones], [6000, 14000]) > ALPHA
    u = sf.empty(2, 3).bernoulli_(sf.tensor([0.0, 1.0, 0.0]))
    np.testing.assert_array_equal(u.numpy(), [[0, 1, 0], [0, 1, 0]])
    v = sf.zeros(3, device="meta").uniform_()
    assert v.device == "meta"


def test_inplace_fill_on_leaf_requiring_grad_is_a_graph_error():
    w = sf.zeros(3, requires_grad=True)
    with pytest.raises(sf.GraphError, match="uniform_"):
        w.uniform_()
    with sf.no_grad():
        w.normal_()
    assert w.requires_grad


def test_randint_like():
    x = sf.zeros(2, 5000, dtype=sf.float64)
    r = sf.randint_like(x, 3, 7)
    assert r.dtype is sf.float64 and tuple(r.shape) == (2, 5000)
    counts = np.bincount(r.numpy().astype(int).ravel(), minlength=7)
    assert counts[:3].sum() == 0
    assert chi2_pvalue(counts[3:], [2500] * 4) > ALPHA
    assert sf.randint_like(sf.zeros(4, dtype=sf.int64), 2).numpy().max() < 2
