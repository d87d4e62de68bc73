"""Adadelta against torch.optim.Adadelta: steps, parameter groups, state and state dicts."""

import copy

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import optim

# the last parameter's missing grad is on purpose
pytestmark = pytest.mark.filterwarnings("ignore:Adadelta.step. 1 of 5 parameters have no grad")

SHAPES = [(6, 4), (6,), (3, 6), (3,), (2, 2)]  # the last one never gets a grad
rng = np.random.default_rng(1)
INIT = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in SHAPES]
X = rng.standard_normal((16, 4)).astype(np.float32)
Y = rng.standard_normal((16, 3)).astype(np.float32)


def loss_grads(arrays):
    """Grads of a fixed MLP loss at the given parameter values (torch as the calculator)."""
    w1, b1, w2, b2 = (torch.tensor(a, requires_grad=True) for a in arrays[:4])
    out = torch.tanh(torch.tensor(X) @ w1.T + b1) @ w2.T + b2
    ((out - torch.tensor(Y)) ** 2).mean().backward()
    return [p.grad.numpy() for p in (w1, b1, w2, b2)]


def make():
    return ([sf.tensor(a.copy(), requires_grad=True) for a in INIT],
            [torch.tensor(a.copy(), requires_grad=True) for a in INIT])


def step_both(sf_ps, t_ps, sf_opt, t_opt):
    for p, g in zip(sf_ps, loss_grads([p._data for p in sf_ps])):
        p.grad = sf.tensor(g)
    for p, g in zip(t_ps, loss_grads([p.detach().numpy() for p in t_ps])):
        p.grad = torch.tensor(g)
    sf_opt.step()
    t_opt.step()


def assert_close(sf_ps, t_ps, step):
    for i, (a, b) in enumerate(zip(sf_ps, t_ps)):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=f"param {i} after step {step}")


def groups(ps, opts):
    return ps if opts is None else [{"params": ps[:2], **opts[0]}, {"params": ps[2:], **opts[1]}]


@pytest.mark.parametrize("kw,group_opts", [
    (dict(), None),
    (dict(lr=0.5, rho=0.8, eps=1e-5), None),
    (dict(lr=1.0, weight_decay=0.1), None),
    (dict(lr=2.0, maximize=True), None),
    (dict(lr=1.0, rho=0.95, weight_decay=0.01, maximize=True, foreach=False), None),
    (dict(lr=1.0), ({"lr": 0.3, "rho": 0.5}, {"weight_decay": 0.2, "eps": 1e-4})),
])
def test_matches_torch_step_by_step(kw, group_opts):
    sf_ps, t_ps = make()
    sf_opt = optim.Adadelta(groups(sf_ps, group_opts), **kw)
    t_opt = torch.optim.Adadelta(groups(t_ps, group_opts), **kw)
    for step in range(12):
        step_both(sf_ps, t_ps, sf_opt, t_opt)
        assert_close(sf_ps, t_ps, step)
    assert np.array_equal(sf_ps[-1].data, INIT[-1]) and sf_ps[-1] not in sf_opt.state
    for p, tp in zip(sf_ps[:4], t_ps[:4]):
        s, ts = sf_opt.state[p], t_opt.state[tp]
        assert set(s) == set(ts) == {"step", "square_avg", "acc_delta"}
        for key in s:
            np.testing.assert_allclose(np.asarray(s[key].data), ts[key].numpy(), rtol=1e-5,
                                       atol=1e-7, err_msg=key)
    assert sf_opt.state_dict()["param_groups"] == t_opt.state_dict()["param_groups"]


def test_large_parameter():
    a = rng.standard_normal((300, 301)).astype(np.float32)
    p, tp = sf.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True)
    sf_opt, t_opt = optim.Adadelta([p], weight_decay=0.1), torch.optim.Adadelta(
        [tp], weight_decay=0.1)
    for step in range(4):
        g = rng.standard_normal(a.shape).astype(np.float32)
        p.grad, tp.grad = sf.tensor(g), torch.tensor(g)
        sf_opt.step()
        t_opt.step()
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-5, atol=1e-7,
                                   err_msg=f"step {step}")


def test_arguments_rejected_as_pytorch_rejects_them():
    p = [sf.ones(2, requires_grad=True)]
    tp = [torch.ones(2, requires_grad=True)]
    for kw in (dict(lr=-1.0), dict(rho=1.5), dict(rho=-0.1), dict(eps=-1.0),
               dict(weight_decay=-0.1)):
        with pytest.raises(ValueError) as ours:
            optim.Adadelta(p, **kw)
        with pytest.raises(ValueError) as theirs:
            torch.optim.Adadelta(tp, **kw)
        assert str(ours.value) == str(theirs.value)
    for kw in (dict(capturable=True), dict(differentiable=True)):
        with pytest.raises(ValueError, match="not implemented in shapeflow"):
            optim.Adadelta(p, **kw)


def test_declared_state_and_meta():
    p = sf.nn.Parameter(sf.empty(100, 10, device="meta"))
    opt = optim.Adadelta([p])
    assert opt.state_per_param(opt.param_groups[0]) == ["square_avg", "acc_delta"]
    assert opt.state_bytes(p) == 2 * 100 * 10 * 4
    p.grad = sf.empty(100, 10, device="meta")
    with pytest.raises(sf.DeviceError, match="meta"):
        opt.step()


def test_state_dict_round_trip_and_torch_interoperation():
    sf_ps, t_ps = make()
    sf_opt, t_opt = optim.Adadelta(sf_ps, lr=0.7), torch.optim.Adadelta(t_ps, lr=0.7)
    for _ in range(3):
        step_both(sf_ps, t_ps, sf_opt, t_opt)
    # shapeflow's state dict into a fresh shapeflow optimizer, torch's into another
    sd = copy.deepcopy(sf_opt.state_dict())
    assert sorted(sd["state"]) == [0, 1, 2, 3]
    ps2 = [sf.tensor(p._data.copy(), requires_grad=True) for p in sf_ps]
    ps3 = [sf.tensor(p._data.copy(), requires_grad=True) for p in sf_ps]
    opt2, opt3 = optim.Adadelta(ps2, lr=0.1), optim.Adadelta(ps3, lr=0.1)
    opt2.load_state_dict(sd)
    opt3.load_state_dict(t_opt.state_dict())
    assert opt2.param_groups[0]["lr"] == opt3.param_groups[0]["lr"] == 0.7
    for step in range(4):
        step_both(sf_ps, t_ps, sf_opt, t_opt)
        for ps, opt in ((ps2, opt2), (ps3, opt3)):
            for p, g in zip(ps, loss_grads([p._data for p in ps])):
                p.grad = sf.tensor(g)
            opt.step()
            assert_close(ps, t_ps, step)
