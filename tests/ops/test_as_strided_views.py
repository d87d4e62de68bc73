"""as_strided of a view reads its base's storage as PyTorch's does: the offset counts from
the base's start (default: the view's own), strides are the storage's; the gradient goes to
the view's own elements only."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf

VIEWS = {
    "offset slice": lambda m: m.arange(20.0)[5:15],
    "transpose": lambda m: m.arange(12.0).reshape(3, 4).T,
    "column slice": lambda m: m.arange(12.0).reshape(3, 4)[:, 1:],
    "row slice": lambda m: m.arange(24.0).reshape(6, 4)[2:5],
    "contiguous": lambda m: m.arange(12.0).reshape(3, 4),
}
CALLS = [((2, 2), (1, 2), {}), ((2, 2), (1, 2), {"storage_offset": 0}),
         ((2, 3), (3, 1), {"storage_offset": 2}), ((3,), (2,), {})]


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("size,stride,kw", CALLS)
def test_values_and_gradients_equal_pytorchs(view, size, stride, kw):
    tb = torch.arange(24.0, dtype=torch.float64, requires_grad=True)
    sb = sf.arange(24.0, dtype=sf.float64).requires_grad_()
    tx = VIEWS[view](_Maker(torch, tb))
    sx = VIEWS[view](_Maker(sf, sb))
    try:
        want = torch.as_strided(tx, size, stride, **kw)
    except RuntimeError:
        with pytest.raises(sf.ShapeflowError):
            sf.as_strided(sx, size, stride, **kw)
        return
    got = sf.as_strided(sx, size, stride, **kw)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    w = np.random.default_rng(0).standard_normal(tuple(want.shape))
    (want * torch.tensor(w)).sum().backward()
    (got * sf.tensor(w)).sum().backward()
    np.testing.assert_allclose(sb.grad.numpy(), tb.grad.numpy(), rtol=0, atol=1e-12)


class _Maker:
    """`m.arange(n)` giving a view of one shared base (so views are views of the same
    storage in both frameworks)."""

    def __init__(self, module, base) -> None:
        self.module, self.base = module, base

    def arange(self, n: float, **_):
        return self.base[:int(n)]


def test_as_strided_scatter_gradient_is_finite_differences():
    """PyTorch 2.13's own as_strided_scatter gradient fails its gradcheck (it sends the
    gradient to the overwritten elements); shapeflow's gives zeros there, as the math does."""
    x = sf.randn(3, 3, dtype=sf.float64, requires_grad=True)
    src = sf.randn(2, 2, dtype=sf.float64)
    assert sf.autograd.gradcheck(lambda t: sf.as_strided_scatter(t, src, (2, 2), (1, 2), 0),
                                 (x,))
    (sf.as_strided_scatter(x, src, (2, 2), (1, 2), 0) * 3.0).sum().backward()
    assert x.grad.numpy().reshape(-1)[:4].tolist() == [0.0] * 4  # the four overwritten
