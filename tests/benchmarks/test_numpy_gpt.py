"""The hand-written NumPy GPT step (the benchmark's floor) computes what PyTorch does."""

import math

import numpy as np
import pytest
import torch
from benchmarks.numpy_gpt import GPTParams, _causal_softmax, gelu, loss_and_grads, make_step

from tests.models.twins import TorchGPT

CFG = dict(vocab_size=17, block_size=8, n_layer=2, n_head=2, n_embd=16)


def _twin_and_data(b=3, t=8):
    torch.manual_seed(0)
    twin = TorchGPT(**CFG)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, CFG["vocab_size"], (b, t))
    targets = rng.integers(0, CFG["vocab_size"], (b, t))
    return twin, idx, targets


def _torch_loss(twin, idx, targets):
    return twin(torch.tensor(idx), torch.tensor(targets))[1]


def test_gelu_matches_erf():
    x = np.linspace(-12, 12, 20001, dtype=np.float32)
    exact = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    deriv = np.array([0.5 * math.erfc(-v / math.sqrt(2.0))
                      + v * math.exp(-0.5 * v * v) / math.sqrt(2 * math.pi)
                      for v in x.astype(np.float64)])
    got, dgot = gelu(x)
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dgot, deriv, rtol=1e-6, atol=1e-6)


# small scores skip the row maxima; large ones, or a row whose exps all underflow, need them
@pytest.mark.parametrize("spread, shift", [(1.0, 0.0), (300.0, 0.0), (1.0, -500.0)])
def test_causal_softmax_matches_pytorch(spread, shift):
    scores = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32) * spread
    scores[0, 0, 5] += shift
    mask = torch.triu(torch.full((8, 8), -math.inf), 1)
    want = torch.softmax(torch.tensor(scores) + mask, dim=-1).numpy()
    _causal_softmax(scores)
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-7)


def test_loss_and_gradients_match_pytorch():
    twin, idx, targets = _twin_and_data()
    params = GPTParams(twin)
    loss = _torch_loss(twin, idx, targets)
    loss.backward()
    got, grads = loss_and_grads(params, idx, targets)
    np.testing.assert_allclose(got, loss.item(), rtol=1e-5)
    named = dict(twin.named_parameters())
    assert grads.keys() == named.keys()
    for name, p in named.items():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_adamw_steps_match_pytorch():
    twin, idx, targets = _twin_and_data()
    step = make_step(twin, idx, targets, lr=1e-3)
    opt = torch.optim.AdamW(twin.parameters(), lr=1e-3, foreach=False)
    for _ in range(2):
        opt.zero_grad()
        _torch_loss(twin, idx, targets).backward()
        opt.step()
        step()
    c = CFG["n_embd"]
    for name, p in twin.named_parameters():
        got, want = step.params.tensors[name], p.detach().numpy()
        if name.endswith("attn.c_attn.bias"):
            # the key bias shifts a query's scores by one constant: its gradient is 0 but for
            # rounding, whose sign AdamW turns into a step of up to lr: 2 steps, either side
            np.testing.assert_allclose(got[c:2 * c], want[c:2 * c], rtol=0, atol=2 * 2 * 1e-3)
            got, want = np.delete(got, np.s_[c:2 * c]), np.delete(want, np.s_[c:2 * c])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=name)
