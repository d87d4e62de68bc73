"""Blockwise attention: PyTorch's values and gradients, O(L) saved, masks redrawn not kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.backend.cpu import kernels
from shapeflow.nn.attention import SDPBackend, sdpa_kernel
from shapeflow.ops.nn import flash_attention as fa
from shapeflow.ops.nn.flash_attention import FlashAttention

F = sf.nn.functional

CASES = [  # (L, S, causal, mask kind, k/v heads): blocks of 128 cross every boundary
    (64, 64, False, None, 2), (300, 300, True, None, 2), (200, 260, False, None, 2),
    (130, 300, True, None, 2), (300, 300, False, "bool", 2), (257, 129, False, "float", 2),
    (160, 160, False, None, 1),  # k and v broadcast over the heads
    # one block (the one-pass path), and just past it
    (1, 1, True, None, 2), (100, 40, True, None, 2), (128, 128, True, None, 2),
    (129, 129, True, None, 2), (200, 200, True, None, 2), (256, 256, True, None, 2),
    (129, 129, False, "bool", 2),
]


def _inputs(L, S, mask, kv_heads, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 2, L, 8)).astype(dtype)
    k = rng.standard_normal((2, kv_heads, S, 8)).astype(dtype)
    v = rng.standard_normal((2, kv_heads, S, 5)).astype(dtype)
    m = None
    if mask == "bool":
        m = rng.random((L, S)) > 0.3
        m[3] = False  # a row that sees nothing: zeros, as PyTorch's math kernel gives
    elif mask == "float":
        m = rng.standard_normal((L, S)).astype(dtype)
    g = rng.standard_normal((2, 2, L, 5)).astype(dtype)
    return q, k, v, m, g


def _run(kernel, q, k, v, m, g, causal):
    with sdpa_kernel(kernel):
        Q, K, V = (sf.tensor(a, requires_grad=True) for a in (q, k, v))
        out = F.scaled_dot_product_attention(Q, K, V, attn_mask=None if m is None else
                                             sf.tensor(m), is_causal=causal)
        out.backward(sf.tensor(g))
    kind = type(out.grad_fn)
    return kind, [out.detach().numpy(), Q.grad.numpy(), K.grad.numpy(), V.grad.numpy()]


@pytest.mark.parametrize("L,S,causal,mask,kv_heads", CASES)
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_flash_equals_pytorch_and_the_math_kernel(L, S, causal, mask, kv_heads, dtype, tol):
    q, k, v, m, g = _inputs(L, S, mask, kv_heads, dtype)
    kind, flash = _run("flash", q, k, v, m, g, causal)
    assert kind is FlashAttention
    _, math = _run("math", q, k, v, m, g, causal)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    to = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, attn_mask=None if m is None else torch.tensor(m), is_causal=causal)
    to.backward(torch.tensor(g))
    ref = [to.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()]
    for a, b, c in zip(flash, ref, math):
        np.testing.assert_allclose(a, b, atol=tol, rtol=tol)
        np.testing.assert_allclose(a, c, atol=tol, rtol=tol)


@pytest.mark.parametrize("L,S,causal,mask", [(300, 300, True, None), (200, 260, False, None),
                                              (130, 300, True, None), (300, 300, False, "bool"),
                                              (257, 129, False, "float")])
@pytest.mark.parametrize("compiled", [True, False])
def test_online_softmax_over_key_panels(monkeypatch, L, S, causal, mask, compiled):
    """Keys in panels of 128 (not 512): the running max and sum rescale earlier panels."""
    monkeypatch.setattr(fa, "KBLOCK", 128)
    old = kernels.set_enabled(compiled)
    try:
        q, k, v, m, g = _inputs(L, S, mask, 2, np.float32)
        _, flash = _run("flash", q, k, v, m, g, causal)
    finally:
        kernels.set_enabled(old)
    _, math = _run("math", q, k, v, m, g, causal)
    for a, b in zip(flash, math):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("L,causal,mask", [(64, True, None), (200, True, None),
                                           (129, False, "bool")])
def test_numpy_path_equals_the_compiled_one(L, causal, mask):
    q, k, v, m, g = _inputs(L, L, mask, 2, np.float32, seed=1)
    _, compiled = _run("flash", q, k, v, m, g, causal)
    old = kernels.set_enabled(False)
    try:
        _, numpy = _run("flash", q, k, v, m, g, causal)
    finally:
        kernels.set_enabled(old)
    for a, b in zip(compiled, numpy):
        np.testing.assert_allclose(a, b, atol=2e-6, rtol=2e-5)


@pytest.mark.parametrize("L,causal", [(64, True), (200, False), (600, True)])
def test_bfloat16_equals_pytorchs_within_bf16_rounding(L, causal):
    """bf16 q, k, v: computed in float32 blocks, rounded once; PyTorch's bf16 SDPA."""
    q, k, v, _, g = _inputs(L, L, None, 2, np.float32, seed=2)
    Q, K, V = (sf.tensor(a).to(sf.bfloat16).requires_grad_() for a in (q, k, v))
    with sdpa_kernel("flash"):
        out = F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
    assert type(out.grad_fn) is FlashAttention and out.dtype is sf.bfloat16
    out.backward(sf.tensor(g).to(sf.bfloat16))
    tq, tk, tv = (torch.tensor(a).bfloat16().requires_grad_() for a in (q, k, v))
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    to.backward(torch.tensor(g).bfloat16())
    for a, b in zip((out, Q.grad, K.grad, V.grad), (to, tq.grad, tk.grad, tv.grad)):
        np.testing.assert_allclose(a.float().detach().numpy(), b.detach().float().numpy(),
                                   atol=3e-2, rtol=3e-2)


def test_flash_gradients_match_finite_differences():
    q, k, v, _, _ = _inputs(9, 11, None, 2, np.float64, seed=3)
    args = [sf.tensor(a, requires_grad=True) for a in (q[:1, :1], k[:1, :1], v[:1, :1])]
    with sdpa_kernel("flash"):
        assert sf.autograd.gradcheck(
            lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), args)


def test_grad_of_grad_goes_through_the_math_ops():
    q, k, v, _, _ = _inputs(6, 6, None, 2, np.float64, seed=4)
    second = []
    for kernel in ("flash", "math"):
        args = [sf.tensor(a[:1, :1], requires_grad=True) for a in (q, k, v)]
        with sdpa_kernel(kernel):
            out = F.scaled_dot_product_attention(*args)
        gq, = sf.autograd.grad((out ** 2).sum(), [args[0]], create_graph=True)
        (gq ** 2).sum().backward()
        second.append([a.grad.detach().numpy() for a in args])
    for a, b in zip(*second):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_dropout_masks_are_redrawn_in_backward_not_saved():
    q, k, v, _, g = _inputs(200, 200, None, 2, np.float64, seed=5)
    Q, K, V = (sf.tensor(a, requires_grad=True) for a in (q, k, v))
    with sdpa_kernel("flash"):
        sf.manual_seed(7)
        out = F.scaled_dot_product_attention(Q, K, V, dropout_p=0.3)
    saved = [t for t in out.grad_fn.saved_tensors if t.dtype is sf.bool]
    assert not saved and max(t.numel() for t in out.grad_fn.saved_tensors) < 200 * 200
    out.backward(sf.tensor(g))
    # the same masks, drawn from the same seed, give the math kernel's result: rebuild them
    op = out.grad_fn
    keep = np.zeros((2, 2, 200, 200))
    for b, g0 in fa._groups(q.shape, 200, 8, np.dtype(np.float64), False, 0.3):
        for i0 in range(0, 200, 128):
            for j0 in range(0, 200, 128):
                blk = keep[b][..., i0:i0 + 128, j0:j0 + 128]
                blk[...] = op._keep(g0, i0, j0, blk.shape)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(8)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(out.detach().numpy(), (p * keep) @ v, atol=1e-12)
    dv = np.swapaxes(p * keep, -1, -2) @ g
    np.testing.assert_allclose(V.grad.numpy(), dv, atol=1e-12)
    assert 0.6 < (keep > 0).mean() < 0.8


def test_the_selector_and_its_errors():
    x = sf.randn(1, 1, 4, 8)
    with sdpa_kernel(SDPBackend.MATH):
        assert type(F.scaled_dot_product_attention(x, x, x).grad_fn) is not FlashAttention
    with sdpa_kernel(["flash", "math"]):  # a mask that needs a gradient: math runs
        m = sf.zeros(4, 4, requires_grad=True)
        assert type(F.scaled_dot_product_attention(x, x, x, attn_mask=m).grad_fn) \
            is not FlashAttention
    with sdpa_kernel("flash"), pytest.raises(ValueError, match="no allowed kernel"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=sf.zeros(4, 4, requires_grad=True))
    with pytest.raises(ValueError, match="unknown kernel"), sdpa_kernel("fast"):
        pass


def test_memory_report_plans_either_kernel():
    gpt = sf.models.GPT(65, 256, 2, 4, 64, dropout=0.0, device="meta")
    idx = sf.empty(2, 256, dtype=sf.int64, device="meta")
    flash = sf.memory.report(gpt, idx, idx)
    math = sf.memory.report(gpt, idx, idx, attention="math")
    assert flash.attention == "flash" and math.attention == "math"
    # per block the math kernel keeps the [B, H, T, T] float32 probabilities; flash instead
    # the logsumexp. Both keep one [B, T, C] for the output projection: flash's own output,
    # laid out [B, T, H, hd] so merging the heads is a view; math's merged-heads copy.
    probs, lse = 2 * 4 * 256 * 256 * 4, 2 * 4 * 256 * 4
    assert math.activations - flash.activations == 2 * (probs - lse)
    with sdpa_kernel("math"):
        assert sf.memory.report(gpt, idx, idx).attention == "math"
    with pytest.raises(sf.memory.MemoryPlanError, match="attention must be"):
        sf.memory.report(gpt, idx, idx, attention="fast")


def test_cli_memory_plans_either_kernel(capsys):
    from shapeflow.cli import main

    args = ["memory", "gpt", "--layers", "2", "--d-model", "64", "--heads", "4", "--seq",
            "256", "--vocab", "65"]
    sizes = {}
    for kernel in ("flash", "math"):
        assert main(args + ["--attention", kernel]) == 0
        out = capsys.readouterr().out
        sizes[kernel] = next(line for line in out.splitlines() if "activations" in line)
    assert sizes["flash"] != sizes["math"]


@pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")
def test_heads_last_inputs_take_the_compiled_backward(monkeypatch):
    # llama's layout: q, k, v and the output's gradient [B, T, H, D] viewed as [B, H, T, D]
    # (y.transpose(1, 2).contiguous().view(B, T, -1) gives that gradient): every block's dS
    # still goes through the compiled kernel
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 40, 4, 8)).astype(np.float32) for _ in range(3))
    g = rng.standard_normal((2, 40, 4, 8)).astype(np.float32)
    calls = []
    compiled = kernels.flash_grad
    monkeypatch.setattr(kernels, "flash_grad", lambda *a: calls.append(compiled(*a)) or
                        calls[-1])
    xs = [sf.tensor(a, requires_grad=True) for a in (q, k, v)]
    ts = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in xs), is_causal=True).backward(
        sf.tensor(g).transpose(1, 2))
    torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2) for t in ts), is_causal=True).backward(
            torch.tensor(g).transpose(1, 2))
    assert calls and all(calls)
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=2e-5, atol=2e-6)
