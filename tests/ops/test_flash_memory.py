"""Flash attention keeps what PyTorch's CPU kernel keeps: per op and over whole models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.nn.attention import sdpa_kernel
from tests.models.twins import TorchGPT, TorchViT

F = sf.nn.functional


def _torch_saved_bytes(fn, params=()) -> int:
    """Bytes of the distinct storages PyTorch's autograd keeps for fn()'s backward, less
    the parameters' (a memory report counts those apart from the activations)."""
    skip = {p.untyped_storage().data_ptr() for p in params}
    seen: dict = {}

    def pack(t):
        if t.layout == torch.strided:
            s = t.untyped_storage()
            if s.data_ptr() not in skip:
                seen[s.data_ptr()] = max(seen.get(s.data_ptr(), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


@pytest.mark.parametrize("T", [64, 256])
def test_flash_saves_what_pytorchs_cpu_kernel_saves(T):
    """q, k, v, the output and the float32 logsumexp: PyTorch's own saved bytes, exactly."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 4, T, 16)).astype(np.float32) for _ in range(3))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    torch_bytes = _torch_saved_bytes(
        lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True))
    Q, K, V = (sf.tensor(a, requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(Q, K, V, is_causal=True)
    ours = sum(t.nbytes for t in out.grad_fn.saved_tensors)
    assert ours == torch_bytes == 4 * (2 * 4 * T * 16) * 4 + 2 * 4 * T * 4


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_the_merge_of_heads_after_flash_is_a_view(device):
    """The output is laid out [B, T, H, hd], as PyTorch's: transpose(1, 2).reshape copies
    nothing, so the projection after it keeps no [B, T, C] of its own."""
    q = sf.randn(2, 4, 200, 8, device=device)
    with sdpa_kernel("flash"):
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    merged = y.transpose(1, 2).reshape(2, 200, 32)
    assert merged._base is y
    if device == "cpu":
        assert np.shares_memory(merged.numpy(), y.numpy())
        np.testing.assert_array_equal(merged.numpy(), y.numpy().transpose(0, 2, 1, 3)
                                      .reshape(2, 200, 32))
    with sdpa_kernel("math"):  # the math kernel's output is C-ordered [B, H, T, hd]: a copy
        y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert y.transpose(1, 2).reshape(2, 200, 32)._base is None


def test_gpt_and_vit_keep_pytorchs_saved_bytes():
    """A training step's activations, planned on meta with flash, against the storages
    PyTorch's autograd keeps on the same models (dropout 0)."""
    B, T, V = 2, 128, 65
    rng = np.random.default_rng(0)
    idx, tgt = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    twin = TorchGPT(V, T, 2, 4, 64)
    torch_gpt = _torch_saved_bytes(lambda: twin(torch.tensor(idx), torch.tensor(tgt)),
                                   twin.parameters())
    gpt = sf.models.GPT(V, T, 2, 4, 64, dropout=0.0)
    ours = sf.memory.report(gpt, sf.tensor(idx), sf.tensor(tgt), attention="flash")
    # The one difference is cross-entropy's: shapeflow keeps the logits and each row's
    # float64 logsumexp [B * T] (backward's softmax is exp(logits - lse), one pass; float64
    # so that logits of 1e6 keep their gradient), where PyTorch keeps the log-softmax output
    # (the same bytes as the logits) and nll_loss's 4-byte total_weight.
    assert ours.activations - torch_gpt == B * T * 8 - 4

    x = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    tvit = TorchViT(32, 8, 3, 10, 64, 2, 4)
    torch_vit = _torch_saved_bytes(lambda: tvit(torch.tensor(x)).sum(), tvit.parameters())
    vit = sf.models.ViT(32, 8, 3, 10, 64, 2, 4)
    ours = sf.memory.report(vit, sf.tensor(x), loss_fn=lambda o: o.sum(), attention="flash")
    assert ours.activations == torch_vit
