"""The style_transfer row's two sides compute the same thing: TransformerNet's loss and
gradients in shapeflow match PyTorch's, step after step of Adam (small images for speed).
Gradients are compared in float64: fifteen convolutions and instance norms deep, float32
rounding alone moves some entries of the first layer's gradient by ~1%, in PyTorch too."""

import numpy as np
import torch
from benchmarks.style_transfer import make_pair

import shapeflow as sf


def test_float32_losses_match_pytorch():
    model, twin, xa, ta = make_pair(batch=2, size=32)
    loss = sf.nn.functional.mse_loss(model(sf.tensor(xa)), sf.tensor(ta))
    tloss = torch.nn.functional.mse_loss(twin(torch.tensor(xa)), torch.tensor(ta))
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)


def test_losses_and_gradients_match_pytorch_over_adam_steps():
    model, twin, xa, ta = make_pair(batch=2, size=32)
    model, twin, xa, ta = model.double(), twin.double(), xa.astype(np.float64), \
        ta.astype(np.float64)
    x, t, tx, tt = sf.tensor(xa), sf.tensor(ta), torch.tensor(xa), torch.tensor(ta)
    opt = sf.optim.Adam(model.parameters(), lr=1e-3)
    topt = torch.optim.Adam(twin.parameters(), lr=1e-3, foreach=False)
    for _ in range(2):
        loss = sf.nn.functional.mse_loss(model(x), t)
        tloss = torch.nn.functional.mse_loss(twin(tx), tt)
        loss.backward()
        tloss.backward()
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-10)
        named = dict(twin.named_parameters())
        # a conv bias before an InstanceNorm gets a zero gradient: rounding noise on both
        # sides, so the tolerance scales with the largest gradient of the model
        scale = max(float(p.grad.abs().max()) for p in twin.parameters())
        for name, p in model.named_parameters():
            ref = named[name].grad.numpy()
            np.testing.assert_allclose(p.grad.numpy(), ref, rtol=1e-7, atol=1e-9 * scale,
                                       err_msg=name)
        opt.step()
        topt.step()
        opt.zero_grad()
        topt.zero_grad()
