"""sf.native_layer_norm / native_group_norm / native_batch_norm against torch's: output, stats."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import check_op

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_native_layer_norm(affine):
    x, w, b = (RNG.standard_normal(s) for s in ((2, 3, 4), (3, 4), (3, 4)))

    def call(mod):
        def fn(x, w, b):
            return mod.native_layer_norm(x, (3, 4), w if affine in ("both", "weight") else None,
                                         b if affine in ("both", "bias") else None, 1e-5)
        return fn

    # the stats carry no gradient (PyTorch's rule): gradcheck the output alone
    check_op(call(sf), call(torch), x, w, b, rtol=1e-4, atol=1e-5, gradcheck=False)
    args = [sf.tensor(a).requires_grad_(True) for a in (x, w, b)]
    assert sf.autograd.gradcheck(lambda *a: call(sf)(*a)[0], args)


def test_native_group_norm():
    x, w, b = (RNG.standard_normal(s) for s in ((2, 4, 3, 2), (4,), (4,)))
    check_op(lambda x, w, b: sf.native_group_norm(x, w, b, 2, 4, 6, 2, 1e-5),
             lambda x, w, b: torch.native_group_norm(x, w, b, 2, 4, 6, 2, 1e-5), x, w, b,
             rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("training", [False, True])
def test_native_batch_norm(training):
    x, w, b = (RNG.standard_normal(s) for s in ((4, 3, 5), (3,), (3,)))
    rm, rv = RNG.standard_normal(3).astype(np.float32), RNG.uniform(0.5, 2, 3).astype(np.float32)
    ours = (sf.tensor(rm), sf.tensor(rv))
    theirs = (torch.tensor(rm), torch.tensor(rv))
    check_op(lambda x, w, b: sf.native_batch_norm(x, w, b, *ours, training, 0.1, 1e-5),
             lambda x, w, b: torch.native_batch_norm(x, w, b, *theirs, training, 0.1, 1e-5),
             x, w, b, rtol=1e-4, atol=1e-5, gradcheck=False, meta=False)
    for a, t in zip(ours, theirs):  # check_op ran each once: the running stats agree
        np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-6)
