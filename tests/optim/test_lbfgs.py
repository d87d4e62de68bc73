"""LBFGS against torch.optim.LBFGS in float64: iterates, function evaluations and state."""

import copy

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import optim

rng = np.random.default_rng(5)
INIT = [rng.standard_normal((6, 3)), rng.standard_normal(3)]
X = rng.standard_normal((40, 6))
Y = (rng.random((40, 3)) > 0.5).astype(np.float64)


def _loss(lib, ps, x, y):
    """L2-regularised logistic regression: convex, so trajectories are stable to compare (on
    a small MLP, L-BFGS multiplies last-bit differences ~30x every 20 iterations)."""
    w, b = ps
    z = x @ w + b
    return (lib.log(1 + lib.exp(z)) - y * z).mean() + 0.002 * (w * w).sum()


def make(own_autograd=False, **kw):
    sf_ps = [sf.tensor(a.copy(), requires_grad=True) for a in INIT]
    t_ps = [torch.tensor(a.copy(), requires_grad=True) for a in INIT]
    sx, sy, tx, ty = sf.tensor(X), sf.tensor(Y), torch.tensor(X), torch.tensor(Y)
    sf_opt, t_opt = optim.LBFGS(sf_ps, **kw), torch.optim.LBFGS(t_ps, **kw)
    calls = {"sf": 0, "torch": 0}

    def sf_closure():
        # torch computes loss and grads at shapeflow's parameter values, so any difference
        # comes from the optimizer alone (the loss returned in float64: its tolerance_change
        # tests compare losses to ~1e-9)
        calls["sf"] += 1
        sf_opt.zero_grad()
        if own_autograd:
            loss = _loss(sf, sf_ps, sx, sy)
            loss.backward()
            return loss
        tp = [torch.tensor(p._data.copy(), requires_grad=True) for p in sf_ps]
        loss = _loss(torch, tp, tx, ty)
        loss.backward()
        for p, q in zip(sf_ps, tp):
            p.grad = sf.tensor(q.grad.numpy())
        return sf.tensor(loss.item(), dtype=sf.float64)

    def t_closure():
        calls["torch"] += 1
        t_opt.zero_grad()
        loss = _loss(torch, t_ps, tx, ty)
        loss.backward()
        return loss

    return sf_ps, t_ps, sf_opt, t_opt, sf_closure, t_closure, calls


def assert_close(sf_ps, t_ps, msg=""):
    for i, (a, b) in enumerate(zip(sf_ps, t_ps)):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-6, atol=1e-9,
                                   err_msg=f"param {i} {msg}")


@pytest.mark.parametrize("kw", [
    dict(max_iter=2),
    dict(lr=0.5, max_iter=5, history_size=3),
    dict(max_iter=20, tolerance_grad=1e-5),
    dict(lr=1, max_iter=4, max_eval=6, history_size=2, tolerance_change=1e-12),
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", max_iter=2),
    dict(line_search_fn="strong_wolfe", max_iter=6, history_size=4, lr=0.8,
         tolerance_change=1e-7, tolerance_grad=1e-5),
])
def test_trajectory_matches_torch(kw):
    sf_ps, t_ps, sf_opt, t_opt, sf_closure, t_closure, calls = make(**kw)
    for step in range(20):
        a = sf_opt.step(sf_closure)
        b = t_opt.step(t_closure)
        np.testing.assert_allclose(float(a), b.item(), rtol=1e-6, err_msg=f"loss @ {step}")
        assert_close(sf_ps, t_ps, f"after step {step}")
        assert calls["sf"] == calls["torch"]
    s, ts = sf_opt.state[sf_ps[0]], t_opt.state[t_ps[0]]
    assert s["n_iter"] == ts["n_iter"] and s["func_evals"] == ts["func_evals"]
    assert len(s["old_dirs"]) == len(ts["old_dirs"])
    np.testing.assert_allclose(s["d"].data, ts["d"].numpy(), rtol=1e-5, atol=1e-10)
    assert sf_opt.state_dict()["param_groups"] == t_opt.state_dict()["param_groups"]


def test_with_shapeflow_autograd_first_steps_match():
    sf_ps, t_ps, sf_opt, t_opt, sf_closure, t_closure, _ = make(own_autograd=True, max_iter=10)
    for step in range(3):
        sf_opt.step(sf_closure)
        t_opt.step(t_closure)
        assert_close(sf_ps, t_ps, f"after step {step}")


def test_state_dict_round_trip_and_from_torch():
    kw = dict(lr=0.5, max_iter=3, history_size=5)
    sf_ps, t_ps, sf_opt, t_opt, sf_closure, t_closure, _ = make(**kw)
    for _ in range(3):
        sf_opt.step(sf_closure)
        t_opt.step(t_closure)
    sd = copy.deepcopy(sf_opt.state_dict())
    assert sorted(sd["state"]) == [0]
    for source in (sd, t_opt.state_dict()):
        ps2, _, opt2, _, closure2, _, _ = make(lr=0.1)
        for p, q in zip(ps2, sf_ps):
            p._data[...] = q._data
        opt2.load_state_dict(copy.deepcopy(source))
        assert opt2.param_groups[0]["lr"] == 0.5
        t3 = [torch.tensor(p.detach().numpy().copy(), requires_grad=True) for p in t_ps]
        opt3 = torch.optim.LBFGS(t3, **kw)  # torch continues from its own state
        opt3.load_state_dict(t_opt.state_dict())

        def t3_closure(opt3=opt3, t3=t3):
            opt3.zero_grad()
            loss = _loss(torch, t3, torch.tensor(X), torch.tensor(Y))
            loss.backward()
            return loss

        for step in range(4):
            opt2.step(closure2)
            opt3.step(t3_closure)
            assert_close(ps2, t3, f"continued step {step}")


def test_declared_state_bytes_once_history_is_full():
    kw = dict(lr=0.5, max_iter=10, history_size=3)
    sf_ps, _, opt, _, closure, _, _ = make(**kw)
    declared = opt.total_state_bytes()
    assert declared == (2 + 2 * 3) * sum(p.nbytes for p in sf_ps)
    opt.step(closure)
    s = opt.state[sf_ps[0]]
    assert len(s["old_dirs"]) == 3  # the history filled up
    kept = (s["d"].nbytes + s["prev_flat_grad"].nbytes
            + sum(v.nbytes for v in s["old_dirs"] + s["old_stps"]))
    assert kept == declared


def test_errors():
    p = sf.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="learning rate"):
        optim.LBFGS([p], lr=-1)
    with pytest.raises(ValueError, match="strong_wolfe"):
        optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [p]}, {"params": [sf.tensor([1.0], requires_grad=True)]}])
    with pytest.raises(ValueError, match="closure"):
        optim.LBFGS([p]).step(None)
