"""RMSprop, Adagrad, Adamax, NAdam, RAdam (and Adam's amsgrad) against torch.optim, float64."""

import copy

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import optim

pytestmark = pytest.mark.filterwarnings("ignore:.*parameters have no grad")

SHAPES = [(5, 3), (5,), (2, 5), (2,), (2, 2)]  # the last one never gets a grad
rng = np.random.default_rng(7)
INIT = [rng.standard_normal(s) * 0.5 for s in SHAPES]
X = rng.standard_normal((12, 3))
Y = rng.standard_normal((12, 2))


def loss_grads(arrays):
    """Grads of a fixed float64 MLP loss at the given parameter values (torch computes)."""
    w1, b1, w2, b2 = (torch.tensor(a, requires_grad=True) for a in arrays[:4])
    out = torch.tanh(torch.tensor(X) @ w1.T + b1) @ w2.T + b2
    ((out - torch.tensor(Y)) ** 2).mean().backward()
    return [p.grad.numpy() for p in (w1, b1, w2, b2)]


def make():
    return ([sf.tensor(a.copy(), requires_grad=True) for a in INIT],
            [torch.tensor(a.copy(), requires_grad=True) for a in INIT])


def set_grads(ps, torch_side=False):
    arrays = [p.detach().numpy() if torch_side else p._data for p in ps]
    for p, g in zip(ps, loss_grads(arrays)):
        p.grad = torch.tensor(g) if torch_side else sf.tensor(g)


def groups(ps, opts):
    return ps if opts is None else [{"params": ps[:2], **opts[0]}, {"params": ps[2:], **opts[1]}]


CASES = [
    ("RMSprop", dict(), None),
    ("RMSprop", dict(lr=1e-2, alpha=0.9, momentum=0.8, weight_decay=0.1), None),
    ("RMSprop", dict(lr=3e-3, centered=True, maximize=True), None),
    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5, eps=1e-6),
     ({"alpha": 0.95}, {"momentum": 0.0, "weight_decay": 0.05})),
    ("Adagrad", dict(), None),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1,
                     initial_accumulator_value=0.5), None),
    ("Adagrad", dict(lr=0.05, eps=1e-6, maximize=True), ({"lr_decay": 0.1}, {})),
    ("Adamax", dict(), None),
    ("Adamax", dict(lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1), None),
    ("Adamax", dict(lr=5e-3, eps=1e-3, maximize=True), ({"lr": 0.02}, {})),
    ("NAdam", dict(), None),
    ("NAdam", dict(lr=1e-2, weight_decay=0.1, momentum_decay=1e-2), None),
    ("NAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True, maximize=True),
     None),
    ("NAdam", dict(lr=1e-2, betas=(0.8, 0.9)), ({"momentum_decay": 0.1}, {"eps": 1e-4})),
    ("RAdam", dict(), None),
    ("RAdam", dict(lr=1e-2, weight_decay=0.1), None),
    ("RAdam", dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True, maximize=True),
     None),
    ("RAdam", dict(lr=1e-2, betas=(0.5, 0.7)), ({"lr": 0.05}, {"eps": 1e-4})),
    ("Adam", dict(lr=1e-2, amsgrad=True, weight_decay=0.1, maximize=True), None),
    ("AdamW", dict(lr=1e-2, amsgrad=True, betas=(0.5, 0.6)), ({"amsgrad": False}, {})),
]


@pytest.mark.parametrize("name,kw,group_opts", CASES)
def test_trajectory_matches_torch_float64(name, kw, group_opts):
    sf_ps, t_ps = make()
    sf_opt = getattr(optim, name)(groups(sf_ps, group_opts), **kw)
    t_opt = getattr(torch.optim, name)(groups(t_ps, group_opts), **kw)
    new = name not in ("Adam", "AdamW")  # the older two keep fewer of torch's flags
    assert sf_opt.defaults == t_opt.defaults or not new
    for step in range(25):
        set_grads(sf_ps)
        set_grads(t_ps, torch_side=True)
        sf_opt.step()
        t_opt.step()
        for i, (a, b) in enumerate(zip(sf_ps, t_ps)):
            np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-6, atol=1e-12,
                                       err_msg=f"{name} param {i} after step {step}")
    assert np.array_equal(sf_ps[-1].data, INIT[-1])
    for p, tp in zip(sf_ps, t_ps):
        s, ts = sf_opt.state[p], t_opt.state[tp]
        assert set(s) == set(ts)
        for key in s:
            np.testing.assert_allclose(np.asarray(s[key].data), ts[key].numpy(), rtol=1e-6,
                                       atol=1e-12, err_msg=key)
    if new:
        assert sf_opt.state_dict()["param_groups"] == t_opt.state_dict()["param_groups"]


@pytest.mark.parametrize("name,kw", [("RMSprop", dict(momentum=0.9, centered=True)),
                                     ("Adagrad", dict(initial_accumulator_value=0.1)),
                                     ("Adamax", dict()), ("NAdam", dict()),
                                     ("RAdam", dict()), ("Adam", dict(amsgrad=True))])
def test_declared_state_bytes_equal_what_a_step_keeps(name, kw):
    sf_ps, _ = make()
    opt = getattr(optim, name)(sf_ps, **kw)
    declared = [opt.state_bytes(p) for p in sf_ps]
    set_grads(sf_ps)
    opt.step()
    for p, d in zip(sf_ps[:4], declared):
        kept = sum(v.nbytes for k, v in opt.state[p].items() if k not in ("step", "mu_product"))
        assert kept == d == len(opt.state_per_param(opt.param_groups[0])) * p.nbytes
    assert opt.total_state_bytes() == sum(declared)


@pytest.mark.parametrize("name,kw", [("RMSprop", dict(momentum=0.9, centered=True)),
                                     ("Adagrad", dict(lr_decay=0.1)), ("Adamax", dict()),
                                     ("NAdam", dict(lr=1e-2)), ("RAdam", dict(lr=1e-2))])
def test_state_dict_round_trip_and_torch_interop(name, kw):
    sf_ps, t_ps = make()
    sf_opt = getattr(optim, name)(sf_ps, **kw)
    t_opt = getattr(torch.optim, name)(t_ps, **kw)
    for _ in range(4):
        set_grads(sf_ps)
        set_grads(t_ps, torch_side=True)
        sf_opt.step()
        t_opt.step()
    # round trip within shapeflow
    sd = copy.deepcopy(sf_opt.state_dict())
    ps2 = [sf.tensor(p._data.copy(), requires_grad=True) for p in sf_ps]
    opt2 = getattr(optim, name)(ps2, lr=0.5)
    opt2.load_state_dict(sd)
    # a torch optimizer's state_dict loaded into shapeflow
    ps3 = [sf.tensor(p.detach().numpy().copy(), requires_grad=True) for p in t_ps]
    opt3 = getattr(optim, name)(ps3, lr=0.5)
    opt3.load_state_dict(t_opt.state_dict())
    assert opt3.param_groups[0]["lr"] == t_opt.param_groups[0]["lr"]
    for _ in range(6):
        for ps, o in ((sf_ps, sf_opt), (ps2, opt2), (ps3, opt3)):
            set_grads(ps)
            o.step()
        set_grads(t_ps, torch_side=True)
        t_opt.step()
    for a, b, c, t in zip(sf_ps, ps2, ps3, t_ps):
        # NAdam's float32 mu_product comes back in the parameter's dtype (as in torch)
        np.testing.assert_allclose(a.data, b.data, rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(c.data, t.detach().numpy(), rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(a.data, t.detach().numpy(), rtol=1e-6, atol=1e-12)
    # shapeflow's state_dict loads into torch
    t_sd = {"state": {k: {n: torch.tensor(np.array(v.data)) for n, v in s.items()}
                      for k, s in opt2.state_dict()["state"].items()},
            "param_groups": copy.deepcopy(opt2.state_dict()["param_groups"])}
    t_ps2 = [torch.tensor(p._data.copy(), requires_grad=True) for p in ps2]
    t_opt2 = getattr(torch.optim, name)(t_ps2, **kw)
    t_opt2.load_state_dict(t_sd)
    set_grads(ps2)
    opt2.step()
    set_grads(t_ps2, torch_side=True)
    t_opt2.step()
    for a, t in zip(ps2, t_ps2):
        np.testing.assert_allclose(a.data, t.detach().numpy(), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("name,kw,match", [
    ("RMSprop", dict(lr=-1.0), "learning rate"), ("RMSprop", dict(alpha=-0.1), "alpha"),
    ("RMSprop", dict(momentum=-0.1), "momentum"), ("Adagrad", dict(lr_decay=-1), "lr_decay"),
    ("Adagrad", dict(initial_accumulator_value=-1), "initial_accumulator"),
    ("Adamax", dict(betas=(1.0, 0.9)), "beta"), ("NAdam", dict(momentum_decay=-1), "momentum"),
    ("RAdam", dict(eps=-1.0), "epsilon"), ("RAdam", dict(weight_decay=-1.0), "weight_decay"),
])
def test_invalid_options_raise_like_torch(name, kw, match):
    with pytest.raises(ValueError, match=match):
        getattr(optim, name)([sf.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(ValueError, match=match):
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(TypeError, match="lr must be a number"):
        getattr(optim, name)([sf.zeros(2, requires_grad=True)], lr="0.1")


def test_versions_bumped_and_meta_state_declared():
    p = sf.tensor(INIT[0].copy(), requires_grad=True)
    opt = optim.RMSprop([p], momentum=0.9)
    v = p._version[0]
    p.grad = sf.ones(*p.shape, dtype=p.dtype)
    opt.step()
    assert p._version[0] == v + 1
    m = sf.nn.Parameter(sf.empty(100, 10, device="meta"))
    for name in ("RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"):
        assert getattr(optim, name)([m]).state_bytes(m) >= 100 * 10 * 4
