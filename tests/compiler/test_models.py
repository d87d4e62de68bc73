"""Compiled inference equals eager bitwise: the reference models, at the traced shape and at
other sizes in the same bucket, and under autocast."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.models import GPT, MLP, CharLSTM, ResNet, ViT


def _same(a, b) -> None:
    a = a[0] if isinstance(a, tuple) else a
    b = b[0] if isinstance(b, tuple) else b
    assert a.shape == b.shape and a.dtype is b.dtype
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def _tokens(B, L, vocab=64):
    return sf.randint(0, vocab, (B, L))


MODELS = {
    "mlp": (lambda: MLP(in_features=32, hidden=[16, 16], out_features=4), "B",
            lambda B, L: sf.randn(B, 32), [(1, 0), (3, 0), (4, 0), (7, 0)]),
    "gpt": (lambda: GPT(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32), "B,L",
            lambda B, L: _tokens(B, L), [(1, 16), (2, 9), (2, 16), (1, 1), (3, 32)]),
    "vit": (lambda: ViT(image_size=16, patch_size=4, in_channels=3, num_classes=5, dim=32,
                        depth=2, heads=2), "B",
            lambda B, L: sf.randn(B, 3, 16, 16), [(2, 0), (2, 0), (3, 0), (4, 0)]),
    "resnet": (lambda: ResNet(layers=(1, 1, 1, 1), num_classes=5, in_channels=3, width=8), "B",
               lambda B, L: sf.randn(B, 3, 16, 16), [(2, 0), (3, 0), (4, 0)]),
    "lstm": (lambda: CharLSTM(vocab_size=64, embed_dim=16, hidden_size=24, num_layers=2), "B,L",
             lambda B, L: _tokens(B, L), [(2, 8), (2, 5), (2, 7), (1, 8)]),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_replay_equals_eager_across_a_bucket(name):
    build, dynamic, make, sizes = MODELS[name]
    sf.manual_seed(0)
    model = build().eval()
    compiled = sf.compile(model, dynamic=dynamic)
    with sf.no_grad():
        for B, L in sizes:
            x = make(B, L)
            _same(model(x), compiled(x))
            _same(model(x), compiled(x))  # the second call replays a bound shape
    c = compiled.report().counts
    assert c["traces"] == 1 and c["eager"] == 0 and c["breaks"] == 0
    assert c["replays"] == 2 * len(sizes)


def test_replay_under_autocast_equals_eager():
    sf.manual_seed(0)
    model = GPT(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32).eval()
    compiled = sf.compile(model, dynamic="B,L")
    x = _tokens(2, 12)
    with sf.no_grad(), sf.autocast("cpu", dtype=sf.bfloat16):
        _same(model(x), compiled(x))
        _same(model(x), compiled(x))
    with sf.no_grad():  # out of autocast: another phase, traced again
        _same(model(x), compiled(x))
    assert compiled.report().counts["traces"] == 2


def test_compiled_module_is_pytorchs_optimized_module():
    model = MLP(in_features=8, hidden=[4], out_features=2)
    compiled = sf.compile(model)
    assert compiled._orig_mod is model
    assert list(compiled.state_dict()) == [f"_orig_mod.{k}" for k in model.state_dict()]
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    compiled.eval()
    assert not model.training
    assert compiled.in_features == 8 if hasattr(model, "in_features") else True
