"""The llama benchmark's two sides compute the same training steps: losses, grads, weights."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from benchmarks import llama_small

SMALL = dict(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, seq=16, batch=3)


@pytest.mark.parametrize("kv", [2, 4, 1])  # grouped (repeat_kv), one kv head per q head, MQA
def test_steps_match_pytorch(kv):
    model, twin, ia, ta = llama_small.make_pair(dict(SMALL, n_kv_heads=kv))
    assert model.output.weight is model.tok_embeddings.weight  # tied, on both sides
    assert twin.output.weight is twin.tok_embeddings.weight
    opt, topt = llama_small.optimizer(sf, model), llama_small.optimizer(torch, twin)
    idx, tgt, tidx, ttgt = sf.tensor(ia), sf.tensor(ta), torch.tensor(ia), torch.tensor(ta)
    for _ in range(2):
        loss, tloss = model(idx, tgt), twin(tidx, ttgt)
        np.testing.assert_allclose(loss.item(), tloss.item(), rtol=2e-6)
        loss.backward()
        tloss.backward()
        named, tnamed = dict(model.named_parameters()), dict(twin.named_parameters())
        assert named.keys() == tnamed.keys()
        for name, p in named.items():
            np.testing.assert_allclose(p.grad.numpy(), tnamed[name].grad.numpy(),
                                       rtol=1e-4, atol=2e-7, err_msg=name)
        opt.step()
        topt.step()
        opt.zero_grad()
        topt.zero_grad()
    for name, p in model.named_parameters():  # AdamW's steps are lr = 1e-3 each: 1% of one
        np.testing.assert_allclose(p.detach().numpy(), tnamed[name].detach().numpy(),
                                   rtol=1e-5, atol=1e-5, err_msg=name)


def test_rotary_is_a_rotation_of_pairs():
    # the real form of llama's complex rotation: position 0 unchanged, norms of pairs kept
    model, twin, ia, _ = llama_small.make_pair(SMALL)
    cos, sin = twin.cos, twin.sin
    assert tuple(cos.shape) == (SMALL["seq"], 1, SMALL["dim"] // SMALL["n_heads"] // 2)
    np.testing.assert_allclose((cos ** 2 + sin ** 2).numpy(), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(cos[0].numpy(), 1.0)
    np.testing.assert_array_equal(model.cos.numpy(), cos.numpy())


def test_the_bench_rows_run_both_sides():
    fns = llama_small.make_step("llama_small_d64")
    assert set(fns) == {"shapeflow", "torch"}
    for fn in fns.values():
        fn()
    assert llama_small.hidden_dim(64) == 192 and llama_small.hidden_dim(288) == 768
