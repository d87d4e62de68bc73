"""Every layer against its PyTorch twin (copied weights): outputs, input grads, param grads."""

import math
from collections import OrderedDict

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def copy_weights(sf_mod, t_mod):
    """Load sf_mod's state into t_mod (names map 1:1, strict)."""
    t_mod.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                           for k, v in sf_mod.state_dict().items()})


def _leaves(x):
    return x if isinstance(x, tuple) else (x,)


def twin(sf_mod, t_mod, *inputs, kwargs=None, rtol=1e-5, atol=1e-6, grad=True):
    """Run both with the same weights and inputs; compare outputs and all gradients.

    Float numpy inputs require grad; other inputs (int arrays, masks) are passed as tensors.
    """
    kwargs = kwargs or {}
    copy_weights(sf_mod, t_mod)
    sf_in, t_in = [], []
    for x in inputs:
        if isinstance(x, np.ndarray):
            is_float = x.dtype.kind == "f"
            sf_in.append(sf.tensor(x, requires_grad=is_float and grad))
            t_in.append(torch.tensor(x, requires_grad=is_float and grad))
        else:
            sf_in.append(x)
            t_in.append(x)
    sf_kw = {k: sf.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    t_kw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    out_sf, out_t = _leaves(sf_mod(*sf_in, **sf_kw)), _leaves(t_mod(*t_in, **t_kw))
    assert len(out_sf) == len(out_t)
    for a, b in zip(out_sf, out_t):
        if b is None:
            assert a is None
            continue
        assert tuple(a.shape) == tuple(b.shape), (a.shape, b.shape)
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)
    if not grad:
        return out_sf, out_t
    a, b = out_sf[0], out_t[0]
    g = randn(*tuple(b.shape))
    a.backward(sf.tensor(g))
    b.backward(torch.tensor(g))
    for i, (x_sf, x_t) in enumerate(zip(sf_in, t_in)):
        if isinstance(x_t, torch.Tensor) and x_t.requires_grad:
            assert x_sf.grad is not None, f"input {i} got no grad"
            np.testing.assert_allclose(x_sf.grad.numpy(), x_t.grad.numpy(), rtol=rtol,
                                       atol=atol, err_msg=f"grad of input {i}")
    t_params = dict(t_mod.named_parameters())
    sf_params = dict(sf_mod.named_parameters())
    assert list(sf_params) == list(t_params)
    for name, p in sf_params.items():
        tp = t_params[name]
        if tp.grad is None:
            assert p.grad is None or not np.any(p.grad.numpy()), name
            continue
        assert p.grad is not None, f"{name} got no grad"
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"grad of {name}")
    return out_sf, out_t


# ---- Linear, Identity, Flatten -------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)])
def test_linear(bias, shape):
    twin(nn.Linear(3, 4, bias=bias), torch.nn.Linear(3, 4, bias=bias), randn(*shape))


def test_linear_default_init_and_factory_kwargs():
    sf.manual_seed(0)
    m = nn.Linear(64, 32)
    bound = 1 / math.sqrt(64)
    w, b = m.weight._data, m.bias._data
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.9 * bound  # uniform over the whole range
    # U(-a, a) has std a / sqrt(3)
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    m64 = nn.Linear(3, 2, dtype=sf.float64)
    assert m64.weight.dtype is sf.float64 and m64.bias.dtype is sf.float64
    mm = nn.Linear(3, 2, device="meta")
    assert mm.weight.device == "meta" and mm.weight._data is None
    assert nn.Linear(3, 2, bias=False).bias is None
    sf.manual_seed(5)
    a = nn.Linear(4, 4).weight._data.copy()
    sf.manual_seed(5)
    assert np.array_equal(a, nn.Linear(4, 4).weight.data)


def test_identity_flatten_unflatten():
    x = randn(2, 3, 4, 5)
    twin(nn.Identity(7, k=1), torch.nn.Identity(7, k=1), x)
    twin(nn.Flatten(), torch.nn.Flatten(), x)
    twin(nn.Flatten(0, 2), torch.nn.Flatten(0, 2), x)
    twin(nn.Flatten(-2), torch.nn.Flatten(-2), x)
    twin(nn.Unflatten(2, (2, 2)), torch.nn.Unflatten(2, (2, 2)), x)
    twin(nn.Unflatten(-1, (5, -1)), torch.nn.Unflatten(-1, (5, -1)), x)


# ---- activations -----------------------------------------------------------------------------
ACTIVATIONS = [
    (lambda: nn.ReLU(), lambda: torch.nn.ReLU()),
    (lambda: nn.GELU(), lambda: torch.nn.GELU()),
    (lambda: nn.GELU(approximate="tanh"), lambda: torch.nn.GELU(approximate="tanh")),
    (lambda: nn.SiLU(), lambda: torch.nn.SiLU()),
    (lambda: nn.Tanh(), lambda: torch.nn.Tanh()),
    (lambda: nn.Sigmoid(), lambda: torch.nn.Sigmoid()),
    (lambda: nn.Softmax(dim=-1), lambda: torch.nn.Softmax(dim=-1)),
    (lambda: nn.Softmax(dim=0), lambda: torch.nn.Softmax(dim=0)),
]


@pytest.mark.parametrize("make", ACTIVATIONS)
def test_activations(make):
    twin(make[0](), make[1](), randn(3, 4, 5))


def test_relu_inplace_and_softmax_legacy_dim():
    x = sf.tensor(randn(4, 5))
    before = x.numpy().copy()
    out = nn.ReLU(inplace=True)(x)
    assert out is x and np.array_equal(x.numpy(), np.maximum(before, 0))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = nn.Softmax()(sf.tensor(randn(2, 3)))
    np.testing.assert_allclose(y.numpy().sum(axis=1), 1, rtol=1e-6)
    with pytest.raises(ValueError):
        nn.GELU(approximate="fast")


# ---- normalisation -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,norm", [((4, 6), 6), ((2, 3, 4, 5), (4, 5))])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
def test_layer_norm(shape, norm, affine, bias):
    sf_m = nn.LayerNorm(norm, elementwise_affine=affine, bias=bias)
    t_m = torch.nn.LayerNorm(norm, elementwise_affine=affine, bias=bias)
    if affine:  # non-trivial weights so their grads matter
        sf_m.weight._data[...] = randn(*sf_m.weight.shape)
        if bias:
            sf_m.bias._data[...] = randn(*sf_m.bias.shape)
    twin(sf_m, t_m, randn(*shape), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("eps", [None, 1e-6])
@pytest.mark.parametrize("affine", [True, False])
def test_rms_norm(eps, affine):
    sf_m = nn.RMSNorm(6, eps=eps, elementwise_affine=affine)
    t_m = torch.nn.RMSNorm(6, eps=eps, elementwise_affine=affine)
    if affine:
        sf_m.weight._data[...] = randn(6)
    twin(sf_m, t_m, randn(3, 4, 6), rtol=1e-4, atol=1e-5)


def test_norm_default_init():
    ln = nn.LayerNorm(5)
    assert np.array_equal(ln.weight.data, np.ones(5)) and np.array_equal(ln.bias.data,
                                                                         np.zeros(5))
    assert ln.normalized_shape == (5,)
    assert np.array_equal(nn.RMSNorm([2, 3]).weight.data, np.ones((2, 3)))


# ---- dropout ------------------------------------------------------------------------------------
def test_dropout_train_and_eval():
    sf.manual_seed(0)
    x = sf.ones(200, 200)
    d = nn.Dropout(0.3)
    y = d(x).numpy()
    zero = (y == 0).mean()
    assert abs(zero - 0.3) < 0.02
    np.testing.assert_allclose(y[y != 0], 1 / 0.7, rtol=1e-6)
    d.eval()
    assert np.array_equal(d(x).numpy(), x.numpy())
    assert np.array_equal(nn.Dropout(0.0)(x).numpy(), x.numpy())
    with pytest.raises(ValueError):
        nn.Dropout(1.5)


# ---- embedding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("padding_idx", [None, 0, -1])
def test_embedding(padding_idx):
    ids = np.array([[0, 2, 4, 9], [9, 9, 1, 0]], dtype=np.int64)
    sf_m = nn.Embedding(10, 5, padding_idx=padding_idx)
    t_m = torch.nn.Embedding(10, 5, padding_idx=padding_idx)
    twin(sf_m, t_m, ids)
    if padding_idx is not None:
        row = padding_idx % 10
        assert sf_m.padding_idx == row
        assert not np.any(sf_m.weight.grad.numpy()[row])


def test_embedding_init_and_from_pretrained():
    sf.manual_seed(0)
    e = nn.Embedding(1000, 100, padding_idx=3)
    w = e.weight._data
    assert abs(w.mean()) < 0.01 and abs(w.std() - 1) < 0.01
    assert not np.any(w[3])
    pre = sf.randn(4, 3)
    f = nn.Embedding.from_pretrained(pre)
    assert not f.weight.requires_grad and f.weight._data is pre._data
    with pytest.raises(ValueError):
        nn.Embedding(5, 2, padding_idx=5)


# ---- containers ---------------------------------------------------------------------------------
def test_sequential_mlp_matches_torch():
    sf_m = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 2))
    t_m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 8),
                              torch.nn.Tanh(), torch.nn.Linear(8, 2))
    twin(sf_m, t_m, randn(6, 4))


def test_sequential_indexing_slicing_len_append():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c and list(s) == [a, b, c]
    sub = s[1:]
    assert type(sub) is nn.Sequential and list(sub) == [b, c]
    assert list(sub._modules) == ["1", "2"]  # slices keep the names
    with pytest.raises(IndexError):
        s[3]
    s.append(nn.Sigmoid())
    assert len(s) == 4 and isinstance(s[3], nn.Sigmoid)
    del s[1]
    assert list(s._modules) == ["0", "1", "2"] and s[1] is c
    s[0] = nn.Identity()
    assert isinstance(s[0], nn.Identity)
    s.insert(0, b)
    assert s[0] is b and len(s) == 4
    named = nn.Sequential(OrderedDict([("first", a), ("act", b)]))
    assert named.first is a and [n for n, _ in named.named_parameters()] == ["first.weight",
                                                                            "first.bias"]
    assert len(s + named) == 6


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(layers) == 3 and len(list(layers.parameters())) == 6
    layers.append(nn.ReLU())
    layers.extend([nn.Tanh()])
    layers.insert(1, nn.Sigmoid())
    assert [type(m).__name__ for m in layers] == ["Linear", "Sigmoid", "Linear", "Linear",
                                                  "ReLU", "Tanh"]
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    assert layers[-1] is list(layers)[-1]
    del layers[0]
    assert list(layers._modules) == [str(i) for i in range(5)]
    with pytest.raises(IndexError):
        layers[10]
    d = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()})
    d["c"] = nn.Tanh()
    assert list(d) == ["a", "b", "c"] and "a" in d and len(d) == 3
    assert [k for k, _ in d.items()] == ["a", "b", "c"]
    assert [n for n, _ in d.named_parameters()] == ["a.weight", "a.bias"]
    d.pop("b")
    assert list(d.keys()) == ["a", "c"]
    d.update([("z", nn.Identity())])
    assert list(d) == ["a", "c", "z"]


# ---- convolution and pooling --------------------------------------------------------------------
CONVS = [
    dict(in_channels=3, out_channels=4, kernel_size=3),
    dict(in_channels=3, out_channels=6, kernel_size=(3, 2), stride=2, padding=1),
    dict(in_channels=4, out_channels=6, kernel_size=3, padding=2, dilation=2, groups=2,
         bias=False),
    dict(in_channels=2, out_channels=3, kernel_size=3, padding="same"),
    dict(in_channels=2, out_channels=3, kernel_size=(1, 3), padding="valid"),
]


@pytest.mark.parametrize("cfg", CONVS)
def test_conv2d(cfg):
    twin(nn.Conv2d(**cfg), torch.nn.Conv2d(**cfg), randn(2, cfg["in_channels"], 9, 8),
         rtol=1e-4, atol=1e-5)


def test_conv2d_init_and_checks():
    sf.manual_seed(0)
    c = nn.Conv2d(8, 16, 3)
    bound = 1 / math.sqrt(8 * 9)
    assert tuple(c.weight.shape) == (16, 8, 3, 3)
    assert np.abs(c.weight._data).max() <= bound and np.abs(c.bias._data).max() <= bound
    with pytest.raises(ValueError):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError):
        nn.Conv2d(4, 4, 3, stride=2, padding="same")


POOLS = [
    (nn.MaxPool2d, torch.nn.MaxPool2d, dict(kernel_size=2)),
    (nn.MaxPool2d, torch.nn.MaxPool2d, dict(kernel_size=3, stride=2, padding=1)),
    (nn.MaxPool2d, torch.nn.MaxPool2d, dict(kernel_size=2, stride=2, ceil_mode=True)),
    (nn.MaxPool2d, torch.nn.MaxPool2d, dict(kernel_size=(2, 3), dilation=(1, 2))),
    (nn.AvgPool2d, torch.nn.AvgPool2d, dict(kernel_size=2)),
    (nn.AvgPool2d, torch.nn.AvgPool2d, dict(kernel_size=3, stride=1, padding=1)),
    (nn.AvgPool2d, torch.nn.AvgPool2d, dict(kernel_size=3, stride=2, padding=1,
                                            count_include_pad=False, ceil_mode=True)),
    (nn.AvgPool2d, torch.nn.AvgPool2d, dict(kernel_size=2, divisor_override=3)),
]


@pytest.mark.parametrize("sf_cls,t_cls,cfg", POOLS)
def test_pooling(sf_cls, t_cls, cfg):
    twin(sf_cls(**cfg), t_cls(**cfg), randn(2, 3, 7, 9))


def test_max_pool_return_indices():
    x = randn(1, 2, 6, 6)
    out_sf, out_t = twin(nn.MaxPool2d(2, return_indices=True),
                         torch.nn.MaxPool2d(2, return_indices=True), x, grad=False)
    np.testing.assert_array_equal(out_sf[1].numpy(), out_t[1].numpy())


# ---- attention ----------------------------------------------------------------------------------
def _mha(E=8, H=2, **kw):
    sf.manual_seed(0)
    sf_m = nn.MultiheadAttention(E, H, **kw)
    t_m = torch.nn.MultiheadAttention(E, H, **kw)
    # non-zero biases so their grads and placement are checked
    for name, p in sf_m.named_parameters():
        if "bias" in name:
            p._data[...] = randn(*p.shape) * 0.1
    return sf_m, t_m


def test_mha_parameters_match_torch_layout():
    sf_m, t_m = _mha()
    assert [(n, tuple(p.shape)) for n, p in sf_m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t_m.named_parameters()]
    assert list(sf_m.state_dict()) == list(t_m.state_dict())
    fresh = nn.MultiheadAttention(8, 2)
    assert not np.any(fresh.in_proj_bias._data) and not np.any(fresh.out_proj.bias._data)
    bound = math.sqrt(6 / (8 + 24))  # xavier_uniform on [24, 8]
    assert np.abs(fresh.in_proj_weight._data).max() <= bound
    sf_k, t_k = _mha(kdim=5, vdim=3)
    assert [n for n, _ in sf_k.named_parameters()] == [n for n, _ in t_k.named_parameters()]
    with pytest.raises(ValueError):
        nn.MultiheadAttention(10, 3)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_self_attention(need_weights, batch_first):
    sf_m, t_m = _mha(batch_first=batch_first)
    x = randn(2, 5, 8) if batch_first else randn(5, 2, 8)
    sf_x = sf.tensor(x, requires_grad=True)
    t_x = torch.tensor(x, requires_grad=True)
    copy_weights(sf_m, t_m)
    o_sf, w_sf = sf_m(sf_x, sf_x, sf_x, need_weights=need_weights)
    o_t, w_t = t_m(t_x, t_x, t_x, need_weights=need_weights)
    np.testing.assert_allclose(o_sf.detach().numpy(), o_t.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    if need_weights:
        np.testing.assert_allclose(w_sf.detach().numpy(), w_t.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    else:
        assert w_sf is None and w_t is None
    g = randn(*o_t.shape)
    o_sf.backward(sf.tensor(g))
    o_t.backward(torch.tensor(g))
    np.testing.assert_allclose(sf_x.grad.numpy(), t_x.grad.numpy(), rtol=1e-5, atol=1e-6)
    for (n, p), (_, tp) in zip(sf_m.named_parameters(), t_m.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=n)


def _masks(L, S, N, H):
    kpm = np.zeros((N, S), dtype=bool)
    kpm[0, -2:] = True
    kpm[1, 0] = True
    causal = np.triu(np.ones((L, S), dtype=bool), 1)
    float_mask = randn(N * H, L, S)
    return kpm, causal, float_mask


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("case", ["kpm", "causal_bool", "float3d", "kpm_and_causal",
                                  "float_kpm", "is_causal"])
def test_mha_masks(case, need_weights):
    L, S, N, H, E = 4, 4, 2, 2, 8
    sf_m, t_m = _mha(E, H)
    kpm, causal, fmask = _masks(L, S, N, H)
    kw = {"need_weights": need_weights}
    if case == "kpm":
        kw["key_padding_mask"] = kpm
    elif case == "causal_bool":
        kw["attn_mask"] = causal
    elif case == "float3d":
        kw["attn_mask"] = fmask
    elif case == "kpm_and_causal":
        kw["attn_mask"], kw["key_padding_mask"] = causal, kpm
    elif case == "float_kpm":
        kw["key_padding_mask"] = np.where(kpm, -1e9, 0.0).astype(np.float32)
    elif case == "is_causal":
        kw["attn_mask"], kw["is_causal"] = causal, True
    twin(sf_m, t_m, randn(L, N, E), randn(S, N, E), randn(S, N, E), kwargs=kw)


@pytest.mark.parametrize("average", [True, False])
def test_mha_cross_attention_kdim_vdim(average):
    sf_m, t_m = _mha(8, 4, kdim=5, vdim=3, batch_first=True)
    kpm = np.zeros((2, 6), dtype=bool)
    kpm[1, 4:] = True
    twin(sf_m, t_m, randn(2, 3, 8), randn(2, 6, 5), randn(2, 6, 3),
         kwargs={"key_padding_mask": kpm, "average_attn_weights": average})


def test_mha_no_bias_and_unbatched():
    sf_m, t_m = _mha(bias=False)
    twin(sf_m, t_m, randn(4, 8), randn(6, 8), randn(6, 8))
    sf_m, t_m = _mha()
    twin(sf_m, t_m, randn(4, 8), randn(6, 8), randn(6, 8),
         kwargs={"key_padding_mask": np.array([False, False, True, False, False, True])})


def test_mha_sees_in_place_updates_of_its_weights():
    m = nn.MultiheadAttention(8, 2)
    x = sf.randn(3, 2, 8, requires_grad=True)  # dx needs the weights: linear saves them
    out, _ = m(x, x, x)
    with sf.no_grad():
        m.in_proj_weight.mul_(0.5)  # an optimizer step between forward and backward
    with pytest.raises(sf.GraphError, match="modified in place"):
        out.sum().backward()


def test_mha_errors():
    m = nn.MultiheadAttention(8, 2)
    x = sf.randn(4, 2, 8)
    with pytest.raises(sf.ShapeError, match="embed_dim"):
        m(sf.randn(4, 2, 6), x, x)
    with pytest.raises(sf.ShapeError, match="attn_mask"):
        m(x, x, x, attn_mask=sf.zeros(3, 3))
    with pytest.raises(sf.ShapeError, match="key_padding_mask"):
        m(x, x, x, key_padding_mask=sf.zeros(2, 5, dtype=sf.bool))
    with pytest.raises(ValueError, match="is_causal"):
        m(x, x, x, is_causal=True)


def test_mha_on_meta():
    m = nn.MultiheadAttention(16, 4, device="meta", batch_first=True)
    x = sf.empty(2, 10, 16, device="meta")
    out, w = m(x, x, x)
    assert tuple(out.shape) == (2, 10, 16) and tuple(w.shape) == (2, 10, 10)
    out, w = m(x, x, x, need_weights=False)
    assert tuple(out.shape) == (2, 10, 16) and w is None


# ---- losses -------------------------------------------------------------------------------------
def _loss_twin(sf_loss, t_loss, x, target, rtol=1e-5):
    sf_x, t_x = sf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    a = sf_loss(sf_x, sf.tensor(target))
    b = t_loss(t_x, torch.tensor(target))
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=1e-6)
    g = randn(*b.shape)
    a.backward(sf.tensor(g))
    b.backward(torch.tensor(g))
    np.testing.assert_allclose(sf_x.grad.numpy(), t_x.grad.numpy(), rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_and_nll(reduction):
    x = randn(6, 5)
    t = np.array([0, 4, 2, 2, -100, 1], dtype=np.int64)
    w = np.abs(randn(5)) + 0.5
    _loss_twin(nn.CrossEntropyLoss(reduction=reduction),
               torch.nn.CrossEntropyLoss(reduction=reduction), x, t)
    _loss_twin(nn.CrossEntropyLoss(weight=sf.tensor(w), reduction=reduction, label_smoothing=0.1),
               torch.nn.CrossEntropyLoss(weight=torch.tensor(w), reduction=reduction,
                                         label_smoothing=0.1), x, t)
    t2 = np.array([0, 4, 2, 2, 3, 1], dtype=np.int64)
    _loss_twin(nn.CrossEntropyLoss(ignore_index=2, reduction=reduction),
               torch.nn.CrossEntropyLoss(ignore_index=2, reduction=reduction), x, t2)
    logp = np.log(np.exp(x) / np.exp(x).sum(1, keepdims=True)).astype(np.float32)
    _loss_twin(nn.NLLLoss(weight=sf.tensor(w), reduction=reduction),
               torch.nn.NLLLoss(weight=torch.tensor(w), reduction=reduction), logp, t2)


def test_cross_entropy_spatial_and_probabilities():
    _loss_twin(nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), randn(2, 4, 3, 3),
               rng.integers(0, 4, (2, 3, 3)))
    p = np.abs(randn(5, 4))
    p = (p / p.sum(1, keepdims=True)).astype(np.float32)
    _loss_twin(nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss(), randn(5, 4), p)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_and_bce_losses(reduction):
    x, y = randn(4, 3), randn(4, 3)
    _loss_twin(nn.MSELoss(reduction=reduction), torch.nn.MSELoss(reduction=reduction), x, y)
    _loss_twin(nn.L1Loss(reduction=reduction), torch.nn.L1Loss(reduction=reduction), x, y)
    y01 = (rng.random((4, 3)) > 0.5).astype(np.float32)
    _loss_twin(nn.BCEWithLogitsLoss(reduction=reduction),
               torch.nn.BCEWithLogitsLoss(reduction=reduction), x, y01)
    pw, w = np.abs(randn(3)) + 0.5, np.abs(randn(4, 3))
    _loss_twin(nn.BCEWithLogitsLoss(weight=sf.tensor(w), pos_weight=sf.tensor(pw),
                                    reduction=reduction),
               torch.nn.BCEWithLogitsLoss(weight=torch.tensor(w), pos_weight=torch.tensor(pw),
                                          reduction=reduction), x, y01)


def test_loss_buffers_and_legacy_args():
    w = sf.ones(3)
    loss = nn.CrossEntropyLoss(weight=w)
    assert loss.weight is w and list(loss.state_dict()) == ["weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []
    assert nn.MSELoss(size_average=False).reduction == "sum"
    assert nn.MSELoss(reduce=False).reduction == "none"
    with pytest.raises(ValueError):
        nn.L1Loss(reduction="avg")


# ---- a small model end to end -----------------------------------------------------------------
def test_tiny_transformer_block_matches_torch():
    class Block:
        def __init__(self, n):
            self.mod = n.ModuleDict({
                "ln1": n.LayerNorm(8), "attn": n.MultiheadAttention(8, 2, batch_first=True),
                "ln2": n.LayerNorm(8),
                "mlp": n.Sequential(n.Linear(8, 16), n.GELU(), n.Linear(16, 8)),
                "emb": n.Embedding(11, 8), "head": n.Linear(8, 11)})

    sf_b, t_b = Block(nn), Block(torch.nn)
    copy_weights(sf_b.mod, t_b.mod)
    ids = rng.integers(0, 11, (2, 5))
    causal = np.triu(np.ones((5, 5), dtype=bool), 1)
    y = rng.integers(0, 11, (2 * 5,))

    def run(m, lib, F_ce, ids, mask, y):
        h = m["emb"](ids)
        a = m["ln1"](h)
        h = h + m["attn"](a, a, a, attn_mask=mask, need_weights=False)[0]
        h = h + m["mlp"](m["ln2"](h))
        return F_ce(m["head"](h).reshape(10, 11), y)

    ls = run(sf_b.mod, sf, nn.functional.cross_entropy, sf.tensor(ids), sf.tensor(causal),
             sf.tensor(y))
    lt = run(t_b.mod, torch, torch.nn.functional.cross_entropy, torch.tensor(ids),
             torch.tensor(causal), torch.tensor(y))
    np.testing.assert_allclose(ls.item(), lt.item(), rtol=1e-5)
    ls.backward()
    lt.backward()
    for (n, p), (_, tp) in zip(sf_b.mod.named_parameters(), t_b.mod.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=n)
