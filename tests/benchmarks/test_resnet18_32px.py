"""The resnet18_32px row's two sides compute the same thing: the CIFAR-adapted ResNet-18's
loss and gradients in shapeflow match PyTorch's, step after step of SGD with momentum and
weight decay (batch 4 for speed). Gradients are compared in float64, where rounding does not
blur the comparison; the float32 loss is compared too."""

import numpy as np
import torch
from benchmarks.resnet18_32px import make_pair, optimizer

import shapeflow as sf


def test_float32_losses_match_pytorch():
    model, twin, xa, ya = make_pair(batch=4)
    loss = sf.nn.functional.cross_entropy(model(sf.tensor(xa)), sf.tensor(ya))
    tloss = torch.nn.functional.cross_entropy(twin(torch.tensor(xa)), torch.tensor(ya))
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)


def test_losses_and_gradients_match_pytorch_over_sgd_steps():
    model, twin, xa, ya = make_pair(batch=4)
    model, twin, xa = model.double(), twin.double(), xa.astype(np.float64)
    x, y, tx, ty = sf.tensor(xa), sf.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    opt, topt = optimizer(sf, model.parameters()), optimizer(torch, twin.parameters())
    assert model.conv1.kernel_size == (3, 3) and isinstance(model.maxpool, sf.nn.Identity)
    for _ in range(2):
        loss = sf.nn.functional.cross_entropy(model(x), y)
        tloss = torch.nn.functional.cross_entropy(twin(tx), ty)
        loss.backward()
        tloss.backward()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
        named = dict(twin.named_parameters())
        for name, p in model.named_parameters():
            ref = named[name].grad.numpy()
            np.testing.assert_allclose(p.grad.numpy(), ref, rtol=1e-7,
                                       atol=1e-9 * np.abs(ref).max(), err_msg=name)
        opt.step()
        topt.step()
        opt.zero_grad()
        topt.zero_grad()
