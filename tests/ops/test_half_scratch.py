"""16-bit kernels work in float32 blocks, not whole float32 copies: GELU, dropout and flash
attention under bfloat16 allocate little beyond their outputs, and give the same values."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.nn.attention import sdpa_kernel
from shapeflow.ops.nn import flash_attention as fa
from shapeflow.ops.nn.dropout import BLOCK

F = sf.nn.functional


def _peak_above(fn):
    """(result, bytes fn allocated at its peak beyond what it returned)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        out = fn()
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak - max(start, current)


def _bf16(shape, seed=0):
    return sf.tensor(np.random.default_rng(seed).standard_normal(shape)).to(sf.bfloat16)


def test_bf16_gelu_rounds_once_and_keeps_no_float32_copy():
    x = _bf16((1024, 1024))
    F.gelu(x[:1])  # builds the tables once
    out, scratch = _peak_above(lambda: F.gelu(x))
    assert scratch < x.nbytes // 2  # blocks (NumPy's path: ~0.9 MiB); a float32 copy is 2x
    want = F.gelu(x.float()).to(sf.bfloat16)  # float32 steps, rounded once
    np.testing.assert_array_equal(out.float().numpy(), want.float().numpy())


def test_bf16_gelu_backward_is_one_rounding_of_torchs_float32_product():
    x = _bf16((64, 512), seed=1).requires_grad_()
    g = _bf16((64, 512), seed=2)
    F.gelu(x).backward(g)
    tx = torch.tensor(x.detach().float().numpy()).requires_grad_()
    torch.nn.functional.gelu(tx).backward(torch.tensor(g.float().numpy()))
    want = tx.grad.to(torch.bfloat16).float().numpy()  # float32 g * gelu'(x), rounded once
    got = x.grad.float().numpy()
    tx = tx.detach()
    ulp = np.abs(want) * 2.0 ** -7
    assert (np.abs(got - want) <= ulp).all()
    assert (got == want).mean() > 0.99  # the table's 1.5e-7 error flips a rare rounding


def test_bf16_dropout_draws_the_float32_mask_in_blocks():
    x = _bf16((300, 1000)).requires_grad_()  # more draws than one block
    sf.manual_seed(3)
    out, scratch = _peak_above(lambda: F.dropout(x, 0.25))  # its graph keeps the mask
    assert scratch < x.numel() // 2  # a whole float32 draw is 4 bytes per element
    sf.manual_seed(3)
    ref = F.dropout(x.detach().float(), 0.25)  # float32: one whole draw of the same stream
    np.testing.assert_array_equal(out.detach().float().numpy() != 0, ref.numpy() != 0)
    assert x.numel() > BLOCK


@pytest.mark.parametrize("dtype", [sf.float32, sf.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_groups_of_the_batch_give_the_same_values(monkeypatch, dtype, causal):
    rng = np.random.default_rng(4)
    q, k, v, g = (sf.tensor(rng.standard_normal((6, 2, 150, 16))).to(dtype) for _ in range(4))

    def run():
        args = [t.detach().requires_grad_() for t in (q, k, v)]
        with sdpa_kernel("flash"):
            out = F.scaled_dot_product_attention(*args, is_causal=causal)
        out.backward(g)
        return [out.detach().float().numpy()] + [a.grad.float().numpy() for a in args]

    whole = run()
    monkeypatch.setattr(fa, "GROUP_BYTES", 1)  # one row of the batch per group
    assert len(fa._groups(q.shape, 150, 16, np.dtype(np.float32), dtype is sf.bfloat16,
                          0.0)) == 6
    for a, b in zip(whole, run()):
        np.testing.assert_array_equal(a, b)


def test_flash_bf16_backward_scratch_is_bounded():
    """The working bytes stay near GROUP_BYTES at any batch, not a float32 copy of it."""
    measured = []
    for batch in (8, 64):
        rng = np.random.default_rng(5)
        q, k, v, g = (sf.tensor(rng.standard_normal((batch, 4, 64, 32))).to(sf.bfloat16)
                      for _ in range(4))
        args = [t.requires_grad_() for t in (q, k, v)]
        with sdpa_kernel("flash"):
            out = F.scaled_dot_product_attention(*args, is_causal=True)
        with sf.no_grad():
            _, scratch = _peak_above(lambda o=out, g=g: o.grad_fn.backward(g))
        measured.append(scratch)
    assert measured[1] < 1.5 * max(measured[0], fa.GROUP_BYTES)  # 8x the batch
    assert measured[1] < 1.25 * fa.GROUP_BYTES < 10 * q.nbytes  # ungrouped: ~10x q.nbytes
