"""Transformer layers against PyTorch's with the state_dict copied: values and gradients over
norm placement, batch_first, activations and every kind of mask."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.errors import ShapeError

rng = np.random.default_rng(0)
D, H, FF = 8, 2, 16


def load(s, t):
    sd = {k: sf.tensor(v.detach().numpy().copy()) for k, v in t.state_dict().items()}
    assert sorted(sd) == sorted(s.state_dict())  # PyTorch's names, one to one
    s.load_state_dict(sd)
    return s


def pair(a, grad=True):
    return torch.tensor(a, requires_grad=grad), sf.tensor(a, requires_grad=grad)


def masks(kind, lq, lk, b):
    """(torch, shapeflow) attn mask and key padding mask of a kind."""
    if kind == "none":
        return (None, None), (None, None)
    if kind == "bool":
        am = np.triu(np.ones((lq, lk), bool), 1)
        kpm = np.zeros((b, lk), bool)
        kpm[0, -1] = True
    else:
        am = rng.standard_normal((lq, lk)) * 0.5
        kpm = np.zeros((b, lk))
        kpm[1, 0] = -np.inf
    return (torch.tensor(am), torch.tensor(kpm)), (sf.tensor(am), sf.tensor(kpm))


def compare(t_out, s_out, t_mod, s_mod, inputs, tol=1e-9):
    np.testing.assert_allclose(s_out.detach().numpy(), t_out.detach().numpy(), rtol=tol,
                               atol=tol)
    (t_out * t_out).sum().backward()
    (s_out * s_out).sum().backward()
    for ti, si in inputs:
        np.testing.assert_allclose(si.grad.numpy(), ti.grad.numpy(), rtol=1e-8, atol=1e-8)
    sp = dict(s_mod.named_parameters())
    for n, p in t_mod.named_parameters():
        np.testing.assert_allclose(sp[n].grad.numpy(), p.grad.numpy(), rtol=1e-8, atol=1e-8,
                                   err_msg=n)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("mask", ["none", "bool", "float"])
def test_encoder_matches_torch(norm_first, batch_first, activation, mask):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=FF, dropout=0.1, activation=activation, batch_first=batch_first,
              norm_first=norm_first)
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, **kw), 2,
                                    norm=torch.nn.LayerNorm(D), enable_nested_tensor=False)
    s = sf.nn.TransformerEncoder(sf.nn.TransformerEncoderLayer(D, H, **kw), 2,
                                 norm=sf.nn.LayerNorm(D))
    t, s = t.double().eval(), load(s.double().eval(), t)
    x = rng.standard_normal((3, 5, D))
    tx, sx = pair(x)
    (tam, tkpm), (sam, skpm) = masks(mask, 5 if batch_first else 3, 5 if batch_first else 3,
                                     3 if batch_first else 5)
    compare(t(tx, mask=tam, src_key_padding_mask=tkpm),
            s(sx, mask=sam, src_key_padding_mask=skpm), t, s, [(tx, sx)])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("mask", ["none", "bool", "float"])
def test_decoder_matches_torch(norm_first, batch_first, mask):
    torch.manual_seed(0)
    kw = dict(dim_feedforward=FF, dropout=0.0, batch_first=batch_first, norm_first=norm_first,
              activation="gelu")
    t = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, **kw), 2)
    s = sf.nn.TransformerDecoder(sf.nn.TransformerDecoderLayer(D, H, **kw), 2)
    t, s = t.double(), load(s.double(), t)
    b, lt, lm = 2, 4, 6
    tgt = rng.standard_normal((b, lt, D) if batch_first else (lt, b, D))
    mem = rng.standard_normal((b, lm, D) if batch_first else (lm, b, D))
    (tt, st), (tm, sm) = pair(tgt), pair(mem)
    (tam, tkpm), (sam, skpm) = masks(mask, lt, lt, b)
    (tmm, tmkpm), (smm, smkpm) = masks(mask, lt, lm, b)
    compare(t(tt, tm, tgt_mask=tam, memory_mask=tmm, tgt_key_padding_mask=tkpm,
              memory_key_padding_mask=tmkpm),
            s(st, sm, tgt_mask=sam, memory_mask=smm, tgt_key_padding_mask=skpm,
              memory_key_padding_mask=smkpm), t, s, [(tt, st), (tm, sm)])


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
def test_full_transformer_with_causal_target_mask():
    torch.manual_seed(0)
    kw = dict(d_model=D, nhead=H, num_encoder_layers=1, num_decoder_layers=2,
              dim_feedforward=FF, dropout=0.0)
    t = torch.nn.Transformer(**kw).double()
    s = load(sf.nn.Transformer(**kw).double(), t)
    src, tgt = rng.standard_normal((5, 2, D)), rng.standard_normal((4, 2, D))
    (ts, ss), (tt, st) = pair(src), pair(tgt)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    smask = sf.nn.Transformer.generate_square_subsequent_mask(4, dtype=sf.float64)
    np.testing.assert_array_equal(smask.numpy(), tmask.numpy())
    compare(t(ts, tt, tgt_mask=tmask, tgt_is_causal=True),
            s(ss, st, tgt_mask=smask, tgt_is_causal=True), t, s, [(ts, ss), (tt, st)])


def test_defaults_are_pytorchs():
    layer = sf.nn.TransformerEncoderLayer(16, 4)
    assert layer.linear1.out_features == 2048 and layer.dropout.p == 0.1
    assert not layer.norm_first and not layer.self_attn.batch_first
    assert layer.activation is sf.nn.functional.relu
    enc = sf.nn.TransformerEncoder(layer, 2)
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight  # deep copies
    with pytest.raises(ShapeError, match="d_model=16"):
        layer(sf.randn(3, 2, 8))


def test_training_mode_dropout_is_applied():
    layer = sf.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5)
    x = sf.randn(4, 2, 8)
    sf.manual_seed(1)
    a = layer(x)
    layer.eval()
    b = layer(x)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())
