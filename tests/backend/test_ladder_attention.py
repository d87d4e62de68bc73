"""The cpu table counts which path each attention kernel ran: a causal SDPA step's backward
runs the compiled flash blocks, also from `y.sum().backward()` (a broadcast gradient)."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.backend.cpu.ladder import kernel_stats, reset_kernel_stats

F = sf.nn.functional
needs_c = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")


def _step(shape, heads_last: bool, loss) -> dict:
    """One causal SDPA forward and backward; the (kernel, path) counts it left."""
    rng = np.random.default_rng(0)
    leaves = [sf.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
              for _ in range(3)]
    q, k, v = (t.transpose(1, 2) for t in leaves) if heads_last else leaves
    reset_kernel_stats()
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert type(y.grad_fn).__name__ == "FlashAttention"
    loss(y).backward()
    assert all(t.grad is not None for t in leaves)
    return kernel_stats()


LOSSES = {"sum": lambda y: y.sum(),
          "weighted": lambda y: (y * sf.tensor(np.linspace(-1, 1, y.shape[-1],
                                                           dtype=np.float32))).sum(),
          "merged heads": lambda y: y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1)
          .square().sum()}


@needs_c
@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("shape,heads_last", [((2, 4, 40, 8), False), ((2, 40, 4, 8), True),
                                              ((1, 2, 300, 16), False)])
def test_causal_sdpa_backward_runs_the_compiled_flash_blocks(shape, heads_last, loss):
    stats = _step(shape, heads_last, LOSSES[loss])
    assert stats.get(("flash_grad", "compiled"), 0) > 0
    assert stats.get(("flash_grad", "numpy"), 0) == 0
    assert stats.get(("flash_softmax_lse", "compiled"), 0) > 0


def test_without_the_compiled_kernels_numpy_runs_and_is_counted():
    old = kernels.set_enabled(False)
    try:
        stats = _step((2, 4, 40, 8), False, LOSSES["sum"])
    finally:
        kernels.set_enabled(old)
    assert stats.get(("flash_grad", "numpy"), 0) > 0
    assert stats.get(("flash_grad", "compiled"), 0) == 0


@needs_c
def test_many_key_panels_count_the_online_softmax(monkeypatch):
    from shapeflow.ops.nn import flash_attention as fa

    monkeypatch.setattr(fa, "KBLOCK", 128)
    stats = _step((1, 2, 300, 16), False, LOSSES["sum"])
    assert stats.get(("flash_online", "compiled"), 0) > 0
    assert stats.get(("flash_grad", "compiled"), 0) > 0
