"""Training in low precision: bf16-mixed follows fp32, fp16 with a GradScaler survives an
overflow, and master weights keep the updates 16-bit weights would round away."""

import copy

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.cli import main as cli_main
from shapeflow.cli.amp_step import AmpStep
from shapeflow.cli.train import train_gpt
from shapeflow.nn import functional as F

SMALL_GPT = dict(steps=30, batch_size=8, block_size=32, n_layer=1, n_embd=32, n_head=2,
                 lr=1e-2, seed=0, sample_tokens=1, save=None, val_batches=2)


def test_gpt_bf16_mixed_loss_within_2_percent_of_fp32():
    fp32 = train_gpt(precision="fp32", **SMALL_GPT)
    mixed = train_gpt(precision="bf16-mixed", **SMALL_GPT)
    assert fp32["last_loss"] < fp32["first_loss"] - 0.5  # it learned something
    assert abs(mixed["last_loss"] - fp32["last_loss"]) <= 0.02 * fp32["last_loss"]
    assert abs(mixed["val_loss"] - fp32["val_loss"]) <= 0.02 * fp32["val_loss"]


def _mlp_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8)).astype(np.float32)
    y = (x[:, :3].sum(1) > 0).astype(np.int64)
    return sf.tensor(x), sf.tensor(y)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # forced
def test_fp16_grad_scaler_survives_a_forced_overflow():
    sf.manual_seed(0)
    model = sf.nn.Sequential(sf.nn.Linear(8, 16), sf.nn.ReLU(), sf.nn.Linear(16, 2))
    opt = sf.optim.Adam(model.parameters(), lr=1e-2)
    amp = AmpStep("fp16-mixed")
    x, y = _mlp_data()
    losses, scales = [], []
    for step in range(40):
        with amp.autocast():
            out = model(x)
            assert out.dtype is sf.float16
            loss = F.cross_entropy(out, y)
        if step == 10:  # an overflow: the gradients turn inf
            loss = loss * float("inf")
        before = copy.deepcopy([p.detach().numpy().copy() for p in model.parameters()])
        stepped = amp.backward_and_step(loss, opt, model.parameters())
        after = [p.detach().numpy() for p in model.parameters()]
        if step == 10:
            assert not stepped  # skipped: the weights did not move, the scale halved
            assert all((a == b).all() for a, b in zip(after, before))
            assert amp.scaler.get_scale() == scales[-1] / 2
        else:
            assert stepped and np.isfinite(loss.item())
            losses.append(loss.item())
        scales.append(amp.scaler.get_scale())
        assert all(p.grad is None for p in model.parameters())
    assert scales[0] == 2.0**16 and losses[-1] < 0.6 * losses[0]  # training went on


def test_master_weights_keep_updates_bf16_rounds_away():
    # lr * grad = 1e-4 is below half a bfloat16 ulp of 1.0 (2**-8): plain bf16 never moves
    for master, expect in ((False, 1.0), (True, np.float32(1.0) - np.float32(1e-4) * 100)):
        w = sf.nn.Parameter(sf.ones(4, dtype=sf.bfloat16))
        opt = sf.optim.SGD([w], lr=1e-4, master_weights=master)
        for _ in range(100):
            w.grad = sf.ones(4, dtype=sf.bfloat16)
            opt.step()
        assert w.dtype is sf.bfloat16
        if master:
            m = opt.state[w]["master"]
            assert m.dtype is sf.float32
            np.testing.assert_allclose(m.numpy(), expect, rtol=1e-5)
            assert (w.detach().numpy() == m.numpy().astype(w.detach().numpy().dtype)).all()
        else:
            assert (w.detach().float().numpy() == 1.0).all()


@pytest.mark.parametrize("cls", ["AdamW", "Adam", "SGD"])
def test_master_weights_update_exactly_as_float32(cls):
    """Given the same gradients, the fp32 master follows torch's fp32 optimizer exactly."""
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(6).astype(np.float32)
    w0 = torch.tensor(w0).bfloat16().float().numpy()  # representable in bfloat16
    kw = {"lr": 1e-2, "weight_decay": 0.1} | ({"momentum": 0.9} if cls == "SGD" else {})
    w = sf.nn.Parameter(sf.tensor(w0).to(sf.bfloat16))
    tw = torch.nn.Parameter(torch.tensor(w0))
    opt = getattr(sf.optim, cls)([w], master_weights=True, **kw)
    topt = getattr(torch.optim, cls)([tw], **kw)
    for _ in range(5):
        g = torch.tensor(rng.standard_normal(6).astype(np.float32)).bfloat16()
        w.grad = sf.tensor(g.float().numpy()).to(sf.bfloat16)
        tw.grad = g.float()
        opt.step()
        topt.step()
    np.testing.assert_allclose(opt.state[w]["master"].numpy(), tw.detach().numpy(), rtol=1e-6,
                               atol=1e-7)
    assert all(t.dtype is sf.float32 for k, t in opt.state[w].items() if k != "step")
    np.testing.assert_array_equal(w.detach().float().numpy(),
                                  tw.detach().bfloat16().float().numpy())


def test_master_weights_survive_a_state_dict_round_trip():
    w = sf.nn.Parameter(sf.ones(3, dtype=sf.bfloat16))
    opt = sf.optim.AdamW([w], lr=1e-3, master_weights=True)
    w.grad = sf.ones(3, dtype=sf.bfloat16)
    opt.step()
    sd = opt.state_dict()
    w2 = sf.nn.Parameter(w.detach().clone())
    opt2 = sf.optim.AdamW([w2], lr=1e-3, master_weights=True)
    opt2.load_state_dict(sd)
    m = opt2.state[w2]["master"]
    assert m.dtype is sf.float32 and (m.numpy() == opt.state[w]["master"].numpy()).all()
    assert opt2.param_groups[0]["master_weights"] is True


def test_bf16_true_gpt_trains():
    result = train_gpt(precision="bf16-true", **(SMALL_GPT | {"steps": 20}))
    assert result["last_loss"] < result["first_loss"] - 0.5


def test_cli_trains_gpt_in_bf16_mixed(capsys):
    assert cli_main(["train", "gpt", "--precision", "bf16-mixed", "--steps", "3",
                     "--batch-size", "2", "--block-size", "16", "--layers", "1",
                     "--d-model", "16", "--heads", "2", "--sample-tokens", "2",
                     "--val-batches", "1", "--save", ""]) == 0
    assert "bf16-mixed" in capsys.readouterr().out
