"""The hand-written NumPy MLP step (the benchmark's floor) computes what PyTorch does."""

import numpy as np
import torch
from benchmarks.numpy_mlp import loss_and_grads, make_step


def _twin_and_data(sizes=(20, 16, 12, 5), n=9):
    torch.manual_seed(0)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers += [torch.nn.Linear(a, b)] + ([torch.nn.ReLU()] if i < len(sizes) - 2 else [])
    twin = torch.nn.Sequential(*layers)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], n)
    params = [p.detach().numpy().copy() for p in twin.parameters()]
    return twin, params, x, y


def test_loss_and_gradients_match_pytorch():
    twin, params, x, y = _twin_and_data()
    loss = torch.nn.functional.cross_entropy(twin(torch.tensor(x)), torch.tensor(y))
    loss.backward()
    got, grads = loss_and_grads(params, x, y)
    np.testing.assert_allclose(got, loss.item(), rtol=1e-6)
    for g, p in zip(grads, twin.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_sgd_steps_match_pytorch():
    twin, params, x, y = _twin_and_data()
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    step = make_step(params, x, y, lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(twin(torch.tensor(x)), torch.tensor(y)).backward()
        opt.step()
        step()
    for p, tp in zip(params, twin.parameters()):
        np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-5, atol=1e-6)
