"""Softmax, log_softmax, cross-entropy and causal attention on both kernel paths.

Blocks whose values are small enough skip the row maxima; the others shift by them.
Either way the result must match PyTorch in float64.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
from shapeflow.nn import functional as F

rng = np.random.default_rng(0)

ROWS = {
    "small": rng.normal(0, 3, (50, 17)),
    "large": rng.normal(0, 3, (50, 17)) + 200.0,  # exp would overflow without the shift
    "very negative": rng.normal(0, 3, (50, 17)) - 120.0,  # exp would underflow
    "mixed": np.concatenate([rng.normal(0, 3, (25, 17)), rng.normal(0, 3, (25, 17)) - 300]),
    "with -inf": np.where(rng.random((50, 17)) < 0.3, -np.inf, rng.normal(0, 3, (50, 17))),
}


@pytest.mark.parametrize("case", ROWS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_and_log_softmax_match_torch(case, dtype):
    x = ROWS[case].astype(dtype)
    ref = TF.softmax(torch.tensor(x.astype(np.float64)), -1).numpy()
    lref = TF.log_softmax(torch.tensor(x.astype(np.float64)), -1).numpy()
    tol = dict(rtol=2e-6, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-12, atol=0)
    np.testing.assert_allclose(F.softmax(sf.tensor(x), -1).numpy(), ref, **tol)
    got = F.log_softmax(sf.tensor(x), -1).numpy()
    finite = np.isfinite(lref)
    assert np.array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], lref[finite], rtol=tol["rtol"], atol=1e-5)


@pytest.mark.parametrize("case", ["small", "large", "very negative", "mixed"])
def test_cross_entropy_matches_torch(case):
    x = ROWS[case]
    y = rng.integers(0, 17, len(x))
    got = F.cross_entropy(sf.tensor(x), sf.tensor(y)).item()
    ref = TF.cross_entropy(torch.tensor(x), torch.tensor(y)).item()
    assert got == pytest.approx(ref, rel=1e-12)


def test_causal_attention_masks_inf_scores_and_matches_torch():
    q = rng.normal(size=(2, 3, 8, 4))
    k, v = rng.normal(size=(2, 3, 8, 4)), rng.normal(size=(2, 3, 8, 4))
    k[0, 0, 5] = 1e308  # huge scores above the diagonal must not leak into earlier rows
    out = F.scaled_dot_product_attention(sf.tensor(q), sf.tensor(k), sf.tensor(v),
                                         is_causal=True).numpy()
    ref = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                          is_causal=True).numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    rows = ~np.isnan(ref).any(-1)
    np.testing.assert_allclose(out[rows], ref[rows], rtol=1e-10, atol=1e-12)
    assert rows[0, 0, :5].all()  # the rows before the huge key are clean
