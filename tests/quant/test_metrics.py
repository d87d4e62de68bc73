"""sf.quant's numeric metrics against PyTorch's numeric suite (torch.ao.ns.fx.utils)."""

import math

import numpy as np
import pytest
import torch
from torch.ao.ns.fx import utils as ns

import shapeflow as sf
from shapeflow.quant.metrics import cosine_similarity, normalized_l2, sqnr

CASES = {
    "noise 1e-2": lambda r, rng: r + 1e-2 * rng.standard_normal(r.shape),
    "noise 1": lambda r, rng: r + rng.standard_normal(r.shape),
    "rounded": lambda r, rng: np.round(r * 16) / 16,
    "scaled": lambda r, rng: 0.5 * r,
    "negated": lambda r, rng: -r,
    "unrelated": lambda r, rng: rng.standard_normal(r.shape),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("shape", [(7,), (4, 33), (2, 3, 5, 6)])
def test_the_metrics_match_pytorchs_numeric_suite(case, shape):
    rng = np.random.default_rng(len(shape))
    ref = rng.standard_normal(shape).astype(np.float32)
    x = CASES[case](ref, rng).astype(np.float32)
    tr, tx = torch.from_numpy(ref), torch.from_numpy(x)
    r, y = sf.tensor(ref), sf.tensor(x)
    assert sqnr(r, y) == pytest.approx(ns.compute_sqnr(tr, tx).item(), rel=1e-5, abs=1e-4)
    assert normalized_l2(r, y) == pytest.approx(
        ns.compute_normalized_l2_error(tr, tx).item(), rel=1e-5)
    assert cosine_similarity(r, y) == pytest.approx(
        ns.compute_cosine_similarity(tr, tx).item(), rel=1e-5, abs=1e-6)


def test_sqnr_of_a_known_noise_level():
    # signal power 1, noise power 1e-4: 40 dB exactly
    ref = np.array([1.0, -1.0, 1.0, -1.0])
    assert sqnr(ref, ref + 1e-2) == pytest.approx(40.0, abs=1e-9)
    assert normalized_l2(ref, ref + 1e-2) == pytest.approx(1e-2)


def test_identical_and_zero_inputs_agree_with_pytorch():
    ref = np.ones(5, np.float32)
    zero = np.zeros(5, np.float32)
    assert sqnr(ref, ref) == math.inf == ns.compute_sqnr(*map(torch.from_numpy, (ref, ref)))
    assert math.isnan(sqnr(zero, zero))
    assert math.isnan(ns.compute_sqnr(torch.from_numpy(zero), torch.from_numpy(zero)).item())
    assert normalized_l2(ref, ref) == 0.0
    assert cosine_similarity(zero, ref) == 0.0 == ns.compute_cosine_similarity(
        torch.from_numpy(zero), torch.from_numpy(ref)).item()


def test_large_activations_do_not_overflow():
    ref = np.full(1000, 1e30, np.float32)
    assert sqnr(ref, ref * (1 + 1e-3)) == pytest.approx(60.0, abs=1e-3)


def test_shapes_must_match():
    with pytest.raises(sf.ShapeError, match=r"sqnr: the reference has shape \[3\]"):
        sqnr(np.ones(3), np.ones(4))
