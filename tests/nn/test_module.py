"""Module and Parameter: registration, naming, state dicts, hooks, modes, repr, dtype/device."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(sf.randn(3, 2))
        self.register_buffer("running", sf.zeros(2))
        self.register_buffer("scratch", sf.ones(2), persistent=False)
        self.inner = nn.Module()
        self.inner.b = nn.Parameter(sf.zeros(2))
        self.plain = sf.ones(1)  # a plain tensor attribute: not registered

    def forward(self, x):
        return x @ self.w + self.inner.b


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.b = Block()
        self.b.w = self.a.w  # tie

    def forward(self, x):
        return self.b(self.a(x) @ self.a.w.T)


# ---- Parameter -------------------------------------------------------------------------------
def test_parameter_shares_data_and_is_a_leaf():
    t = sf.randn(2, 3)
    p = nn.Parameter(t)
    assert isinstance(p, sf.Tensor) and isinstance(p, nn.Parameter)
    assert p._data is t._data and p.requires_grad and p.is_leaf and p.grad is None
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert str(p) == repr(p)
    q = nn.Parameter(t, requires_grad=False)
    assert not q.requires_grad
    out = p * 2  # ops give plain tensors
    assert type(out) is sf.Tensor
    assert type(p.detach()) is sf.Tensor and p.detach()._data is p._data
    with pytest.raises(sf.DTypeError):
        nn.Parameter(sf.tensor([1, 2]))
    assert nn.Parameter(sf.tensor([1, 2]), requires_grad=False).dtype is sf.int64
    assert tuple(nn.Parameter().shape) == (0,)


def test_parameter_deepcopy_and_pickle():
    p = nn.Parameter(sf.randn(3))
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad
    assert q._data is not p._data and np.array_equal(q.data, p.data)
    r = pickle.loads(pickle.dumps(p))
    assert isinstance(r, nn.Parameter) and np.array_equal(r.data, p.data)


# ---- registration and naming --------------------------------------------------------------
def test_registration_and_names_in_insertion_order():
    m = Block()
    assert [n for n, _ in m.named_parameters()] == ["w", "inner.b"]
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["w"]
    assert [n for n, _ in m.named_buffers()] == ["running", "scratch"]
    assert [n for n, _ in m.named_children()] == ["inner"]
    assert [n for n, _ in m.named_modules()] == ["", "inner"]
    assert [n for n, _ in m.named_parameters(prefix="model")] == ["model.w", "model.inner.b"]
    assert list(m.state_dict()) == ["w", "running", "inner.b"]  # scratch is not persistent
    assert m.get_parameter("inner.b") is m.inner.b
    assert m.get_submodule("inner") is m.inner
    assert m.get_buffer("running") is m.running
    with pytest.raises(AttributeError):
        m.get_submodule("nope")
    assert "plain" not in dict(m.named_buffers())
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        m.missing  # noqa: B018


def test_setattr_and_delattr_move_between_stores():
    m = Block()
    with pytest.raises(TypeError, match="parameter 'w'"):
        m.w = sf.randn(3, 2)  # a plain tensor cannot replace a parameter
    m.w = None
    assert m.w is None and "w" in m._parameters
    assert [n for n, _ in m.named_parameters()] == ["inner.b"]
    m.running = sf.ones(2)  # buffers accept plain tensors
    assert np.array_equal(m.running.numpy(), np.ones(2))
    m.inner = nn.Parameter(sf.ones(1))  # a module name can become a parameter
    assert "inner" not in m._modules and isinstance(m.inner, nn.Parameter)
    del m.inner
    assert "inner" not in m._parameters
    with pytest.raises(KeyError):
        m.register_buffer("plain", sf.ones(1))  # an existing attribute
    with pytest.raises(KeyError):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError):
        m.register_buffer("bad", np.ones(2))


def test_assign_before_init_is_a_clear_error():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(sf.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_tied_parameters_are_counted_once():
    m = Tied()
    params = list(m.parameters())
    assert len(params) == 3  # a.w (shared with b.w), a.inner.b, b.inner.b
    assert [n for n, _ in m.named_parameters()] == ["a.w", "a.inner.b", "b.inner.b"]
    names_all = [n for n, _ in m.named_parameters(remove_duplicate=False)]
    assert names_all == ["a.w", "a.inner.b", "b.w", "b.inner.b"]
    sd = m.state_dict()
    assert list(sd) == ["a.w", "a.running", "a.inner.b", "b.w", "b.running", "b.inner.b"]
    assert sd["a.w"]._data is sd["b.w"]._data
    # a shared module is listed once too
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, shared)
    assert len(list(seq.parameters())) == 2 and len(list(seq.modules())) == 2


# ---- state dict ------------------------------------------------------------------------------
def test_state_dict_is_detached_and_shares_data():
    m = Block()
    sd = m.state_dict()
    assert isinstance(sd, OrderedDict)
    assert sd["w"]._data is m.w._data and not sd["w"].requires_grad
    assert type(sd["w"]) is sf.Tensor
    assert m.state_dict(keep_vars=True)["w"] is m.w


def test_state_dict_round_trip_copies_in_place():
    a, b = Block(), Block()
    sf.manual_seed(1)
    b.w._data[...] = 0
    w_obj, w_arr, v0 = b.w, b.w._data, b.w.version
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert b.w is w_obj and b.w._data is w_arr  # copied into the existing array
    assert b.w.version == v0 + 1
    assert np.array_equal(b.w.data, a.w.data) and b.w._data is not a.w._data
    assert np.array_equal(b.inner.b.data, a.inner.b.data)
    assert b.w.requires_grad and b.w.is_leaf


def test_load_state_dict_maps_to_torch_and_back():
    m = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in m.state_dict().items()})
    m2 = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    m2.load_state_dict({k: sf.tensor(v.numpy()) for k, v in t.state_dict().items()})
    for (k1, v1), (k2, v2) in zip(m.state_dict().items(), m2.state_dict().items()):
        assert k1 == k2 and np.array_equal(v1.numpy(), v2.numpy())


def _arrays(m):
    return {k: v.numpy().copy() for k, v in m.state_dict().items()}


def test_load_state_dict_errors_list_every_key_and_change_nothing():
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    before = _arrays(m)
    versions = [p.version for p in m.parameters()]
    good = {k: sf.zeros(v.shape) for k, v in m.state_dict().items()}
    bad = dict(good)
    bad["0.weight"] = sf.zeros(5, 3)  # shape mismatch
    bad["1.bias"] = sf.zeros(3)  # shape mismatch
    del bad["1.weight"]  # missing
    bad["extra.weight"] = sf.zeros(7)  # unexpected
    with pytest.raises(sf.ShapeError) as e:
        m.load_state_dict(bad)
    msg = str(e.value)
    assert isinstance(e.value, sf.ShapeflowError)
    for key in ("0.weight", "1.bias", "1.weight", "extra.weight"):
        assert key in msg, msg
    assert "[4, 3]" in msg and "[5, 3]" in msg  # expected and found shapes
    assert "[2]" in msg and "[3]" in msg
    assert "[2, 4]" in msg  # the missing key's expected shape
    assert "[7]" in msg  # the unexpected key's shape
    after = _arrays(m)
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert [p.version for p in m.parameters()] == versions


def test_load_state_dict_key_errors_and_strict_false():
    m = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    before = _arrays(m)
    sd = {k: sf.zeros(v.shape) for k, v in m.state_dict().items()}
    del sd["0.bias"]
    sd["head.weight"] = sf.zeros(1)
    with pytest.raises(nn.StateDictError) as e:
        m.load_state_dict(sd)
    assert isinstance(e.value, sf.ShapeflowError) and isinstance(e.value, RuntimeError)
    assert "0.bias" in str(e.value) and "head.weight" in str(e.value)
    assert "[4]" in str(e.value) and "[1]" in str(e.value)
    assert all(np.array_equal(before[k], v) for k, v in _arrays(m).items())
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["0.bias"] and res.unexpected_keys == ["head.weight"]
    assert np.array_equal(m[0].weight.data, np.zeros((4, 3)))
    assert np.array_equal(m[0].bias.data, before["0.bias"])
    # sizes must fit even when not strict
    sd["1.bias"] = sf.zeros(9)
    with pytest.raises(sf.ShapeError, match="1.bias"):
        m.load_state_dict(sd, strict=False)


def test_load_state_dict_dtypes():
    m = nn.Linear(2, 2)
    m.register_buffer("count", sf.tensor([0, 0]))
    sd = m.state_dict()
    sd = {k: v.clone() for k, v in sd.items()}
    sd["weight"] = sf.ones(2, 2, dtype=sf.float64)  # float64 -> float32: cast
    m.load_state_dict(sd)
    assert m.weight.dtype is sf.float32 and np.array_equal(m.weight.data, np.ones((2, 2)))
    w_before = m.weight._data.copy()
    sd["weight"] = sf.zeros(2, 2)
    sd["count"] = sf.tensor([0.5, 1.5])  # float into an int buffer: cannot be cast
    with pytest.raises(sf.DTypeError, match="count"):
        m.load_state_dict(sd)
    assert np.array_equal(m.weight.data, w_before)


# ---- hooks -------------------------------------------------------------------------------------
def test_forward_hooks_fire_and_can_modify():
    m = Block()
    x = sf.ones(1, 3)
    calls = []

    def pre(mod, args):
        calls.append(("pre", mod))
        return (args[0] * 2,)

    def post(mod, args, out):
        calls.append(("post", tuple(args[0].shape)))
        return out + 100

    base = m(x).detach().numpy().copy()
    h1 = m.register_forward_pre_hook(pre)
    h2 = m.register_forward_hook(post)
    with sf.no_grad():
        out = m(x).numpy()
    expected = (2 * x.numpy()) @ m.w._data + m.inner.b._data + 100
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert calls == [("pre", m), ("post", (1, 3))]
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(m(x).detach().numpy(), base)


def test_hook_order_prepend_kwargs_and_context_manager():
    m = nn.Identity()
    order = []
    m.register_forward_hook(lambda mod, a, o: order.append("first"))
    m.register_forward_hook(lambda mod, a, o: order.append("zeroth"), prepend=True)
    m.register_forward_pre_hook(lambda mod, a, kw: ((a[0] + 1,), kw), with_kwargs=True)
    assert m(sf.tensor(1.0)).item() == 2.0
    assert order == ["zeroth", "first"]
    with m.register_forward_hook(lambda mod, a, o: o * 10):
        assert m(sf.tensor(1.0)).item() == 20.0
    assert m(sf.tensor(1.0)).item() == 2.0
    # pre-hook returning a non-tuple wraps it
    m2 = nn.Identity()
    m2.register_forward_pre_hook(lambda mod, a: a[0] * 3)
    assert m2(sf.tensor(2.0)).item() == 6.0


def test_call_goes_through_call_impl(monkeypatch):
    m = nn.Identity()
    seen = []
    original = nn.Module._call_impl

    def spy(self, *args, **kwargs):
        seen.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(nn.Module, "_call_impl", spy)
    m(sf.ones(1))
    assert seen == ["Identity"]


def test_missing_forward():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(sf.ones(1))


# ---- modes, grads, apply -----------------------------------------------------------------------
def test_train_eval_flags_recurse():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5), nn.ReLU()))
    assert all(x.training for x in m.modules())
    assert m.eval() is m
    assert not any(x.training for x in m.modules())
    m.train()
    assert all(x.training for x in m.modules())
    m[1].train(False)
    assert m.training and not m[1].training and not m[1][0].training
    with pytest.raises(ValueError):
        m.train("yes")


def test_zero_grad_requires_grad_apply():
    m = Block()
    m.w.grad = sf.ones(3, 2)
    m.zero_grad(set_to_none=False)
    assert np.array_equal(m.w.grad.numpy(), np.zeros((3, 2)))
    m.zero_grad()
    assert m.w.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    names = []
    m.apply(lambda mod: names.append(type(mod).__name__))
    assert names == ["Module", "Block"]  # children first


# ---- repr ----------------------------------------------------------------------------------------
class SfCustom(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4, bias=False)
        self.scale = 2.0

    def extra_repr(self):
        return "scale=2.0\nline two"


class TorchCustom(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4, bias=False)

    def extra_repr(self):
        return "scale=2.0\nline two"


SfCustom.__name__ = TorchCustom.__name__ = "Custom"


def _arch(n):
    return n.Sequential(OrderedDict([
        ("embed", n.Embedding(10, 4, padding_idx=0)),
        ("blocks", n.ModuleList([n.Sequential(n.LayerNorm(4), n.Linear(4, 8), n.GELU(),
                                              n.Linear(8, 4), n.Dropout(0.1))
                                 for _ in range(3)] + [n.Identity()])),
        ("attn", n.MultiheadAttention(4, 2, batch_first=True)),
        ("heads", n.ModuleDict({"cls": n.Linear(4, 3), "act": n.GELU(approximate="tanh")})),
        ("conv", n.Sequential(n.Conv2d(3, 8, 3, stride=2, padding=1, bias=False),
                              n.Conv2d(8, 8, (3, 1), groups=2, dilation=2), n.ReLU(),
                              n.MaxPool2d(2), n.AvgPool2d(3, stride=1, padding=1),
                              n.Flatten(), n.Unflatten(1, (2, 4)))),
        ("norm", n.RMSNorm(4, eps=1e-6)),
        ("ln_noaffine", n.LayerNorm((2, 4), elementwise_affine=False)),
        ("acts", n.Sequential(n.SiLU(), n.Tanh(), n.Sigmoid(), n.Softmax(dim=-1),
                              n.ReLU(inplace=True))),
        ("losses", n.ModuleList([n.CrossEntropyLoss(), n.MSELoss(), n.L1Loss(),
                                 n.BCEWithLogitsLoss(), n.NLLLoss()])),
        ("empty", n.ModuleList()),
        ("custom", SfCustom() if n is nn else TorchCustom()),
    ]))


def test_repr_matches_torch_for_a_nested_model():
    assert repr(_arch(nn)) == repr(_arch(torch.nn))


# ---- dtype and device ----------------------------------------------------------------------------
def test_to_dtype_keeps_parameters_and_identity():
    m = Block()
    m.register_buffer("steps", sf.tensor([1, 2]))
    w, w_vals = m.w, m.w._data.copy()
    assert m.double() is m
    assert m.w is w and isinstance(m.w, nn.Parameter) and m.w.is_leaf and m.w.requires_grad
    assert m.w.dtype is sf.float64 and m.running.dtype is sf.float64
    assert m.steps.dtype is sf.int64  # integer buffers keep their dtype
    np.testing.assert_array_equal(m.w.data, w_vals.astype(np.float64))
    m.half()
    assert m.w.dtype is sf.float16
    m.bfloat16()
    assert m.w.dtype is sf.bfloat16
    m.to(dtype=sf.float32)
    assert m.w.dtype is sf.float32
    with pytest.raises(sf.DTypeError):
        m.to(sf.int64)


def test_to_moves_grads_and_bumps_versions():
    m = Block()
    m.w.grad = sf.ones(3, 2)
    v = m.w.version
    m.double()
    assert m.w.grad.dtype is sf.float64 and m.w.version > v


def test_to_meta_and_back():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    params = list(m.parameters())
    m.to("meta")
    assert all(a is b for a, b in zip(m.parameters(), params))  # the same Parameter objects
    for p in m.parameters():
        assert isinstance(p, nn.Parameter) and p.is_leaf and p.requires_grad
        assert p.device == "meta" and p._data is None
    out = m(sf.empty(5, 3, device="meta"))
    assert tuple(out.shape) == (5, 2) and out.device == "meta"
    with pytest.raises(sf.DeviceError):
        m.to("cpu")
    assert all(p.device == "meta" for p in m.parameters())  # unchanged after the error
    with pytest.raises(sf.DeviceError):
        m[0].weight.detach().numpy()


def test_build_on_meta_and_to_empty():
    m = nn.Sequential(nn.Linear(1000, 1000, device="meta"),
                      nn.LayerNorm(1000, device="meta"),
                      nn.Embedding(50000, 1000, device="meta"),
                      nn.Conv2d(3, 8, 3, device="meta"),
                      nn.MultiheadAttention(8, 2, device="meta"))
    assert all(p.device == "meta" for p in m.parameters())
    sd = m.state_dict()
    assert tuple(sd["2.weight"].shape) == (50000, 1000)
    m.to_empty(device="cpu")
    assert all(p.device == "cpu" and p._data is not None for p in m.parameters())
    m[0].reset_parameters()
    assert np.abs(m[0].weight._data).max() <= 1 / np.sqrt(1000) + 1e-6


def test_meta_model_loads_with_assign():
    src = nn.Linear(3, 2)
    m = nn.Linear(3, 2, device="meta")
    w = m.weight
    m.load_state_dict(src.state_dict(), assign=True)
    assert m.weight is w and m.weight.device == "cpu"
    np.testing.assert_array_equal(m.weight.data, src.weight.data)
    assert isinstance(m.weight, nn.Parameter) and m.weight.requires_grad


def test_deepcopy_module_is_independent():
    m = nn.Sequential(nn.Linear(2, 2))
    c = copy.deepcopy(m)
    assert c[0].weight is not m[0].weight and isinstance(c[0].weight, nn.Parameter)
    c[0].weight._data[...] = 0
    assert not np.array_equal(m[0].weight.data, c[0].weight.data)
    assert tuple(c(sf.ones(1, 2)).shape) == (1, 2)  # devices survive the copy
    p = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(p(sf.ones(1, 2)).detach().numpy(),
                                  m(sf.ones(1, 2)).detach().numpy())
