"""Reference models: same logits and gradients as PyTorch twins; they learn; GPT generates."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn
from shapeflow.models import GPT, MLP, CharLSTM, ViT
from tests.models.twins import TorchCharLSTM, TorchGPT, TorchViT, copy_weights

VIT = dict(image_size=8, patch_size=2, in_channels=1, num_classes=10, dim=32, depth=2, heads=4)
GPT_CFG = dict(vocab_size=23, block_size=16, n_layer=2, n_head=4, n_embd=32)


def assert_same_grads(sf_model, torch_model, rtol=1e-4, atol=1e-5):
    tp = dict(torch_model.named_parameters())
    for name, p in sf_model.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=rtol,
                                   atol=atol, err_msg=name)


def test_mlp_matches_torch():
    sf.manual_seed(0)
    model = MLP(12, [16, 8], 3)
    twin = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8),
                               torch.nn.ReLU(), torch.nn.Linear(8, 3))
    sd = {k.replace("net.", ""): torch.from_numpy(v.numpy().copy())
          for k, v in model.state_dict().items()}
    twin.load_state_dict(sd)
    x = np.random.default_rng(0).standard_normal((5, 12)).astype(np.float32)
    y = np.array([0, 1, 2, 1, 0])
    out = model(sf.from_numpy(x))
    ref = twin(torch.from_numpy(x))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-6)
    nn.functional.cross_entropy(out, sf.tensor(y)).backward()
    torch.nn.functional.cross_entropy(ref, torch.tensor(y)).backward()
    for (name, p), tp in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_vit_matches_torch():
    sf.manual_seed(0)
    model = ViT(**VIT)
    with sf.no_grad():
        model.cls_token.copy_(sf.randn(1, 1, 32) * 0.1)
    twin = copy_weights(model, TorchViT(**VIT))
    x = np.random.default_rng(1).random((3, 1, 8, 8)).astype(np.float32)
    y = np.array([1, 5, 9])
    out = model(sf.from_numpy(x))
    ref = twin(torch.from_numpy(x))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    nn.functional.cross_entropy(out, sf.tensor(y)).backward()
    torch.nn.functional.cross_entropy(ref, torch.tensor(y)).backward()
    assert_same_grads(model, twin)


def test_gpt_matches_torch():
    sf.manual_seed(0)
    model = GPT(**GPT_CFG)
    twin = copy_weights(model, TorchGPT(**GPT_CFG))
    rng = np.random.default_rng(2)
    idx = rng.integers(0, 23, (2, 12))
    tgt = rng.integers(0, 23, (2, 12))
    logits, loss = model(sf.tensor(idx), sf.tensor(tgt))
    tlogits, tloss = twin(torch.tensor(idx), torch.tensor(tgt))
    np.testing.assert_allclose(logits.detach().numpy(), tlogits.detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    loss.backward()
    tloss.backward()
    assert_same_grads(model, twin)


def test_gpt_tied_embedding_counted_once():
    model = GPT(**GPT_CFG)
    assert model.lm_head.weight is model.transformer.wte.weight
    names = [n for n, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and "transformer.wte.weight" in names


@pytest.mark.parametrize("prompt_len,new", [(3, 10), (5, 20)])
def test_greedy_generation_same_with_and_without_cache(prompt_len, new):
    sf.manual_seed(3)
    model = GPT(**GPT_CFG).eval()
    prompt = sf.tensor(np.random.default_rng(4).integers(0, 23, (2, prompt_len)))
    a = model.generate(prompt, new, do_sample=False, use_cache=True)
    b = model.generate(prompt, new, do_sample=False, use_cache=False)
    assert a.shape == (2, prompt_len + new)  # 5 + 20 > block_size 16: the window slides
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_sampling_is_seeded_and_respects_top_k():
    model = GPT(**GPT_CFG).eval()
    prompt = sf.tensor([[1, 2, 3]])
    g1 = model.generate(prompt, 8, top_k=1, generator=sf.Generator().manual_seed(0))
    greedy = model.generate(prompt, 8, do_sample=False)
    np.testing.assert_array_equal(g1.numpy(), greedy.numpy())  # top_k=1 is greedy
    s1 = model.generate(prompt, 8, generator=sf.Generator().manual_seed(5))
    s2 = model.generate(prompt, 8, generator=sf.Generator().manual_seed(5))
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())


def test_vit_shape_chain_is_the_seeds():
    s = sf.summary(ViT(**VIT), sf.empty("B", 1, 8, 8, device="meta"))
    names = [line.split(":")[0] for line in s.chain().splitlines()]
    assert names[:3] == ["image", "patchify", "project"]
    assert names[-1] == "head" and any(n.startswith("blocks.") for n in names)
    assert s.chain().splitlines()[1].endswith("[B, 16, 4]")
    assert s.chain().splitlines()[-1].endswith("[B, 10]")


def test_mlp_learns_digits():
    from shapeflow.data import DataLoader
    from shapeflow.data.datasets import digits

    sf.manual_seed(0)
    model = MLP(64, 64, 10)
    opt = sf.optim.Adam(model.parameters(), lr=1e-2)
    train = digits("train")
    losses = []
    for _ in range(3):
        for x, y in DataLoader(train, batch_size=64, shuffle=True, seed=0):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:5])


def test_gpt_loss_decreases_on_text():
    from shapeflow.cli.train import train_gpt

    result = train_gpt(steps=40, batch_size=8, block_size=32, n_layer=1, n_embd=32, n_head=2,
                       lr=1e-2, sample_tokens=10, save=None)
    assert result["last_loss"] < result["first_loss"] - 0.8


def test_char_lstm_follows_its_torch_twin_while_training():
    sf.manual_seed(0)
    model = CharLSTM(23, 8, 16, 2)
    twin = copy_weights(model, TorchCharLSTM(23, 8, 16, 2))
    opt = sf.optim.Adam(model.parameters(), lr=1e-2)
    topt = torch.optim.Adam(twin.parameters(), lr=1e-2)
    rng = np.random.default_rng(3)
    ours, theirs = [], []
    for step in range(8):
        idx, tgt = rng.integers(0, 23, (4, 12)), rng.integers(0, 23, (4, 12))
        logits, loss = model(sf.tensor(idx), sf.tensor(tgt))
        tlogits, tloss = twin(torch.tensor(idx), torch.tensor(tgt))
        if step == 0:
            np.testing.assert_allclose(logits.detach().numpy(), tlogits.detach().numpy(),
                                       rtol=1e-4, atol=1e-5)
        loss.backward()
        tloss.backward()
        if step == 0:
            assert_same_grads(model, twin)
        for o in (opt, topt):
            o.step()
            o.zero_grad()
        ours.append(loss.item())
        theirs.append(tloss.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)


def test_char_lstm_learns_and_generates():
    from shapeflow.cli.train_lstm import train_lstm

    result = train_lstm(steps=40, batch_size=8, block_size=32, num_layers=1, hidden_size=64,
                        embed_dim=16, lr=1e-2, sample_tokens=10)
    assert result["last_loss"] < result["first_loss"] - 0.8
