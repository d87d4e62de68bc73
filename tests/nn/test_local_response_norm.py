"""nn.LocalResponseNorm / F.local_response_norm against PyTorch: values, gradients, errors."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.errors import ShapeError


@pytest.mark.parametrize("shape", [(2, 7, 5), (2, 7, 3, 4), (1, 4, 2, 3, 2), (3, 1, 4)])
@pytest.mark.parametrize("size,alpha,beta,k", [(1, 1e-4, 0.75, 1.0), (2, 0.3, 0.6, 1.5),
                                               (3, 1e-2, 0.75, 2.0), (5, 0.5, 1.2, 1.0),
                                               (9, 0.1, 0.5, 0.5)])
def test_matches_torch(shape, size, alpha, beta, k, rng):
    x = rng.standard_normal(shape) * 2
    g = rng.standard_normal(shape)
    t = torch.tensor(x, requires_grad=True)
    s = sf.tensor(x, requires_grad=True)
    yt = torch.nn.LocalResponseNorm(size, alpha, beta, k)(t)
    ys = sf.nn.LocalResponseNorm(size, alpha, beta, k)(s)
    (yt * torch.tensor(g)).sum().backward()
    (ys * sf.tensor(g)).sum().backward()
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_float32_functional_and_repr(rng):
    x = rng.standard_normal((4, 6, 3, 3)).astype(np.float32)
    want = torch.nn.functional.local_response_norm(torch.tensor(x), 4, 0.2, 0.9, 1.0)
    got = sf.nn.functional.local_response_norm(sf.tensor(x), 4, 0.2, 0.9, 1.0)
    assert got.dtype is sf.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    assert repr(sf.nn.LocalResponseNorm(3)) == repr(torch.nn.LocalResponseNorm(3))


def test_errors_and_meta():
    with pytest.raises(ShapeError, match="3-D or more") as e:
        sf.nn.LocalResponseNorm(2)(sf.randn(4, 6))
    assert "unsqueeze" in str(e.value)
    with pytest.raises(ShapeError, match="positive int"):
        sf.nn.functional.local_response_norm(sf.randn(2, 3, 4), 0)
    y = sf.nn.LocalResponseNorm(3)(sf.empty(2, 5, 7, 7, device="meta"))
    assert tuple(y.shape) == (2, 5, 7, 7) and y.device.type == "meta"
