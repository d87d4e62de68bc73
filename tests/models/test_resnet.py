"""sf.models.ResNet: a PyTorch twin (torchvision's layout) it follows step by step; it learns
digits; its shape chain is symbolic; `shapeflow train/summary resnet` work."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn as tnn

import shapeflow as sf
from shapeflow import nn
from shapeflow.cli import main as cli_main
from shapeflow.models import ResNet
from tests.models.twin_resnet import TorchResNet

SMALL = dict(layers=(2, 1, 1), num_classes=10, in_channels=1, width=8, small_input=True)


def twins(cfg):
    sf.manual_seed(0)
    model = ResNet(**cfg)
    twin = TorchResNet(**cfg)
    sd = model.state_dict()
    assert list(sd) == list(twin.state_dict())  # names and order map one to one
    twin.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in sd.items()})
    return model, twin


def test_resnet_follows_its_torch_twin_for_the_first_steps():
    model, twin = twins(SMALL)
    opt = sf.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    topt = torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    losses, tlosses = [], []
    for _ in range(5):
        x = rng.random((16, 1, 8, 8)).astype(np.float32)
        y = rng.integers(0, 10, 16)
        loss = nn.functional.cross_entropy(model(sf.from_numpy(x)), sf.from_numpy(y))
        tloss = tnn.functional.cross_entropy(twin(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
        opt.zero_grad()
        topt.zero_grad()
        losses.append(loss.item())
        tlosses.append(tloss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-4, atol=1e-5)
    for k, v in twin.state_dict().items():  # running stats and batch counts followed too
        np.testing.assert_allclose(model.state_dict()[k].numpy(), v.numpy(), rtol=1e-3,
                                   atol=1e-4, err_msg=k)
    model.eval()
    twin.eval()
    x = rng.random((4, 1, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(model(sf.from_numpy(x)).detach().numpy(),
                               twin(torch.from_numpy(x)).detach().numpy(), rtol=1e-3, atol=1e-4)


def test_resnet18_imagenet_layout_matches_torch_on_one_image():
    cfg = dict(layers=(2, 2, 2, 2), num_classes=10, in_channels=3, width=8, small_input=False)
    model, twin = twins(cfg)
    x = np.random.default_rng(1).random((2, 3, 40, 36)).astype(np.float32)
    out, ref = model(sf.from_numpy(x)), twin(torch.from_numpy(x))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    ref.sum().backward()
    tp = dict(twin.named_parameters())
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=name)


def test_resnet_shape_chain_is_symbolic():
    from shapeflow.device import meta
    from shapeflow.models.registry import build_model

    with meta:
        model = build_model("resnet", device="meta")
    s = sf.summary(model, sf.empty("B", 3, "H", "W", device="meta"))
    lines = s.chain().splitlines()
    assert lines[0].endswith("[B, 3, H, W]")
    assert any(ln.startswith("layer4") and "(H - 1)//32 + 1" in ln for ln in lines)
    assert lines[-1].endswith("[B, 1000]")


def test_cli_summary_resnet(capsys):
    assert cli_main(["summary", "resnet"]) == 0
    out = capsys.readouterr().out
    assert "[B, 3, H, W]" in out and "BatchNorm2d" in out and "[B, 1000]" in out


def test_resnet_wrong_input_names_the_rule():
    with pytest.raises(sf.ShapeError, match="ResNet"):
        ResNet(**SMALL)(sf.randn(1, 8, 8))


def test_cli_train_resnet_learns_digits():
    # one short epoch: the default run (4 epochs) reaches ~97% (see the README). A child
    # process with one BLAS thread: these matmuls are tiny, and on a busy machine BLAS's
    # thread hand-offs cost more than the arithmetic
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "shapeflow", "train", "resnet", "--epochs", "1",
                          "--batch-size", "32", "--width", "8", "--lr", "0.01"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    m = re.search(r"loss ([0-9.]+) -> ([0-9.]+); test accuracy ([0-9.]+)%", out.stdout)
    assert m, out.stdout
    first, last, acc = map(float, m.groups())
    assert acc > 85 and last < 0.5 * first
