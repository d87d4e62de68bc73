"""layer_norm with each affine combination (weight and/or bias, or none) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from tests.ops.harness import check_op


# a size-1 normalized dim: x's exact gradient is 0, torch's float32 one is rounding noise
@pytest.mark.parametrize("shape,ns,atol", [((3, 5), (5,), 1e-5), ((2, 3, 4), (3, 4), 1e-5),
                                           ((4, 1), (1,), 1e-4)])
@pytest.mark.parametrize("has_w,has_b", [(False, False), (True, False), (False, True),
                                         (True, True)])
def test_layer_norm_affine(shape, ns, atol, has_w, has_b):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(ns) + 1.0 if has_w else None
    b = rng.standard_normal(ns) + 2.0 if has_b else None
    check_op(lambda x, w, b: F.layer_norm(x, ns, w, b),
             lambda x, w, b: TF.layer_norm(x, ns, w, b), x, w, b, rtol=1e-4, atol=atol)


def test_native_layer_norm_bias_only():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6)).astype(np.float64)
    b = rng.standard_normal(6)
    out, mean, rstd = sf.native_layer_norm(sf.from_numpy(x), (6,), None, sf.from_numpy(b), 1e-5)
    ref = torch.native_layer_norm(torch.from_numpy(x), (6,), None, torch.from_numpy(b), 1e-5)
    for o, r in zip((out, mean, rstd), ref):
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-12, atol=1e-12)
