"""ParameterList and ParameterDict: registration, state_dict keys equal to PyTorch's,
parameters(), list/dict behaviour, repr, and use inside a model."""

import numpy as np
import pytest
import torch
import torch.nn as tnn

import shapeflow as sf
from shapeflow import nn


class SfNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.plist = nn.ParameterList([nn.Parameter(sf.ones(2, 3)), sf.zeros(3)])
        self.pdict = nn.ParameterDict({"scale": nn.Parameter(sf.ones(3)), "shift": sf.zeros(3)})
        self.blocks = nn.ModuleList([nn.Module()])
        self.blocks[0].inner = nn.ParameterList([sf.ones(1)])

    def forward(self, x):
        return (x @ self.plist[0] + self.plist[1]) * self.pdict["scale"] + self.pdict["shift"]


class TNet(tnn.Module):
    def __init__(self):
        super().__init__()
        self.plist = tnn.ParameterList([tnn.Parameter(torch.ones(2, 3)), torch.zeros(3)])
        self.pdict = tnn.ParameterDict({"scale": tnn.Parameter(torch.ones(3)),
                                        "shift": torch.zeros(3)})
        self.blocks = tnn.ModuleList([tnn.Module()])
        self.blocks[0].inner = tnn.ParameterList([torch.ones(1)])


def test_state_dict_keys_match_pytorch():
    s, t = SfNet(), TNet()
    assert list(s.state_dict()) == list(t.state_dict())
    assert [n for n, _ in s.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert len(list(s.parameters())) == 5


def test_plain_tensors_become_parameters_that_train():
    s = SfNet()
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in s.plist)
    assert isinstance(s.pdict["shift"], nn.Parameter)
    s(sf.ones(4, 2)).sum().backward()
    np.testing.assert_allclose(s.plist[1].grad.numpy(), np.full(3, 4.0))
    np.testing.assert_allclose(s.pdict["shift"].grad.numpy(), np.full(3, 4.0))


def test_load_state_dict_from_pytorch_names():
    s, t = SfNet(), TNet()
    with torch.no_grad():
        for p in t.parameters():
            p.uniform_()
    s.load_state_dict({k: sf.from_numpy(v.numpy().copy()) for k, v in t.state_dict().items()})
    for (k, a), (_, b) in zip(s.state_dict().items(), t.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)


def test_list_operations():
    pl, tl = nn.ParameterList(), tnn.ParameterList()
    for shape in [(2,), (3, 1)]:
        pl.append(sf.zeros(*shape))
        tl.append(torch.zeros(*shape))
    pl.extend([sf.ones(4)])
    tl.extend([torch.ones(4)])
    pl += [sf.ones(1)]
    tl += [torch.ones(1)]
    assert len(pl) == len(tl) == 4
    assert tuple(pl[-1].shape) == (1,) and tuple(pl[1].shape) == (3, 1)
    pl[0] = sf.full((5,), 2.0)
    tl[0] = torch.full((5,), 2.0)
    assert isinstance(pl[0], nn.Parameter)
    assert [tuple(p.shape) for p in pl] == [tuple(p.shape) for p in tl]
    assert [tuple(p.shape) for p in pl[1:3]] == [(3, 1), (4,)]
    assert list(pl.state_dict()) == list(tl.state_dict()) == ["0", "1", "2", "3"]
    with pytest.raises(IndexError):
        pl[4]
    with pytest.raises(TypeError):
        pl.extend(sf.ones(2))


def test_dict_operations():
    pd, td = nn.ParameterDict(), tnn.ParameterDict()
    for d in (pd, td):
        d["b"] = (sf if d is pd else torch).ones(2)
        d.update([("a", (sf if d is pd else torch).zeros(1))])
        d.setdefault("c", (sf if d is pd else torch).zeros(3))
    assert list(pd.keys()) == list(td.keys()) == ["b", "a", "c"]
    assert list(pd.state_dict()) == list(td.state_dict())
    assert "a" in pd and "z" not in pd and pd.get("z") is None
    assert [k for k, _ in pd.items()] == ["b", "a", "c"] and len(list(pd.values())) == 3
    p = pd.pop("a")
    td.pop("a")
    assert tuple(p.shape) == (1,) and list(pd) == list(td) == ["b", "c"]
    assert list(pd.state_dict()) == list(td.state_dict()) == ["b", "c"]
    k, _ = pd.popitem()
    assert k == "c" and len(pd) == 1
    merged = pd | nn.ParameterDict({"x": sf.ones(1)})
    assert list(merged) == ["b", "x"] and merged["b"] is pd["b"]
    # a plain dict goes in sorted, an OrderedDict in its order, both as PyTorch
    from collections import OrderedDict
    for src in ({"z": 1.0, "a": 2.0}, OrderedDict(z=1.0, a=2.0)):
        wrap = {k: sf.tensor(v) for k, v in src.items()}
        twrap = {k: torch.tensor(v) for k, v in src.items()}
        if isinstance(src, OrderedDict):
            wrap, twrap = OrderedDict(wrap), OrderedDict(twrap)
        assert list(nn.ParameterDict(wrap)) == list(tnn.ParameterDict(twrap))
    pd.clear()
    assert len(pd) == 0 and list(pd.parameters()) == []
    with pytest.raises(KeyError):
        pd["missing"]
    with pytest.raises(TypeError):
        pd[0] = sf.ones(1)


def test_repr_matches_pytorch_layout():
    pl = nn.ParameterList([sf.ones(2, 3), sf.ones(3)])
    tl = tnn.ParameterList([torch.ones(2, 3), torch.ones(3)])
    assert repr(pl) == repr(tl).replace("torch.", "shapeflow.")
    pd = nn.ParameterDict({"w": sf.ones(2, dtype=sf.float64), "n": 3})
    td = tnn.ParameterDict({"w": torch.ones(2, dtype=torch.float64), "n": 3})
    assert repr(pd) == repr(td)
    assert repr(nn.ParameterList([sf.ones(1), 3])) == repr(
        tnn.ParameterList([torch.ones(1), 3])).replace("torch.", "shapeflow.")


def test_containers_are_not_callable():
    with pytest.raises(RuntimeError):
        nn.ParameterList([sf.ones(1)])()
    with pytest.raises(RuntimeError):
        nn.ParameterDict()()


def test_to_meta_and_back_keeps_registration():
    s = SfNet().to("meta")
    assert all(p.device == "meta" for p in s.parameters())
    assert list(s.state_dict()) == list(TNet().state_dict())
