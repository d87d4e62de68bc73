"""The lstmcell_loop_f64 row's two sides compute the same thing: gradients of one closure,
then the losses and weights after LBFGS steps (shortened waves, same code as the row)."""

import numpy as np
import torch

import shapeflow as sf
from benchmarks import lstmcell_loop_f64 as bench


def test_one_closure_gives_pytorchs_loss_and_gradients():
    sf.manual_seed(1)
    model, twin = bench.build(sf), bench.build(torch)
    bench.copy_into(model, twin)
    xa, ya = bench.waves(batch=6, steps=15)
    opt = sf.optim.LBFGS(model.parameters())
    topt = torch.optim.LBFGS(twin.parameters())
    loss = bench.closure_for(sf, model, opt, sf.tensor(xa), sf.tensor(ya))()
    tloss = bench.closure_for(torch, twin, topt, torch.tensor(xa), torch.tensor(ya))()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-13)
    tparams = dict(twin.named_parameters())
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[name].grad.numpy(), rtol=1e-10,
                                   atol=1e-13, err_msg=name)


def test_lbfgs_steps_follow_pytorch():
    fns = bench.make(steps=12, batch=5, max_iter=3)
    losses = []
    for _ in range(3):
        a, b = fns["shapeflow"](), fns["torch"]()
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-11)
        losses.append(a.item())
    assert losses[2] < losses[0]  # it trains


def test_waves_are_the_examples():
    x, y = bench.waves(batch=3, steps=10)
    assert x.shape == y.shape == (3, 10) and x.dtype == np.float64
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])  # the target is the next sample
    assert np.abs(x).max() <= 1
