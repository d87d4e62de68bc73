"""OneCycleLR, CyclicLR, CosineAnnealingWarmRestarts, PolynomialLR, ReduceLROnPlateau against
torch.optim.lr_scheduler: every group's lr (and momentum / beta1) at every step."""

import copy

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import optim
from shapeflow.optim import lr_scheduler as S

T = torch.optim.lr_scheduler


def _opts(kind="sgd", lrs=(0.1, 0.02)):
    sf_ps = [sf.tensor([1.0], requires_grad=True) for _ in lrs]
    t_ps = [torch.tensor([1.0], requires_grad=True) for _ in lrs]
    if kind == "sgd":
        return (optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(sf_ps, lrs)], lr=1.0,
                          momentum=0.9),
                torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(t_ps, lrs)],
                                lr=1.0, momentum=0.9))
    return (optim.Adam([{"params": [p], "lr": lr} for p, lr in zip(sf_ps, lrs)]),
            torch.optim.Adam([{"params": [p], "lr": lr} for p, lr in zip(t_ps, lrs)]))


def both(make):
    return make(S), make(T)


SCHEDULES = {
    "onecycle_cos": ("sgd", lambda M, o: M.OneCycleLR(o, max_lr=[0.5, 0.1], total_steps=30)),
    "onecycle_linear_adam": ("adam", lambda M, o: M.OneCycleLR(
        o, max_lr=0.3, epochs=5, steps_per_epoch=6, anneal_strategy="linear", pct_start=0.4,
        base_momentum=0.7, max_momentum=0.9, div_factor=10.0, final_div_factor=100.0)),
    "onecycle_three_phase": ("sgd", lambda M, o: M.OneCycleLR(
        o, max_lr=0.5, total_steps=30, three_phase=True)),
    "onecycle_no_momentum": ("sgd", lambda M, o: M.OneCycleLR(
        o, max_lr=0.5, total_steps=30, cycle_momentum=False, three_phase=True,
        anneal_strategy="linear")),
    "cyclic_triangular": ("sgd", lambda M, o: M.CyclicLR(
        o, base_lr=0.01, max_lr=[0.1, 0.05], step_size_up=4)),
    "cyclic_triangular2": ("sgd", lambda M, o: M.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=5, mode="triangular2")),
    "cyclic_exp_range_adam": ("adam", lambda M, o: M.CyclicLR(
        o, base_lr=[0.01, 0.001], max_lr=0.1, step_size_up=5, mode="exp_range", gamma=0.97,
        base_momentum=0.85, max_momentum=0.95)),
    "cyclic_scale_fn": ("sgd", lambda M, o: M.CyclicLR(
        o, base_lr=0.01, max_lr=0.1, step_size_up=3, scale_fn=lambda x: 0.9**x,
        scale_mode="iterations", cycle_momentum=False)),
    "warm_restarts": ("sgd", lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=5)),
    "warm_restarts_mult": ("sgd", lambda M, o: M.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.001)),
    "polynomial": ("sgd", lambda M, o: M.PolynomialLR(o, total_iters=12, power=2.0)),
    "polynomial_default": ("adam", lambda M, o: M.PolynomialLR(o)),
}


def _state(opt):
    return [(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups]


def _assert_same(sf_opt, t_opt, sf_s, t_s, step):
    for a, b in zip(_state(sf_opt), _state(t_opt)):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-12, atol=1e-15, err_msg=f"lr @ {step}")
        if a[1] is not None:
            np.testing.assert_allclose(a[1], b[1], rtol=1e-12, err_msg=f"momentum @ {step}")
        if a[2] is not None:
            np.testing.assert_allclose(a[2], b[2], rtol=1e-12, err_msg=f"betas @ {step}")
    np.testing.assert_allclose(sf_s.get_last_lr(), t_s.get_last_lr(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_matches_torch(name):
    kind, make = SCHEDULES[name]
    sf_opt, t_opt = _opts(kind)
    sf_s, t_s = make(S, sf_opt), make(T, t_opt)
    _assert_same(sf_opt, t_opt, sf_s, t_s, 0)
    steps = 29 if name.startswith("onecycle") else 40
    for step in range(1, steps + 1):
        sf_opt.step()
        t_opt.step()
        sf_s.step()
        t_s.step()
        _assert_same(sf_opt, t_opt, sf_s, t_s, step)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_state_dict_round_trip_and_torch_state_dict(name):
    kind, make = SCHEDULES[name]
    sf_opt, t_opt = _opts(kind)
    sf_s, t_s = make(S, sf_opt), make(T, t_opt)
    for _ in range(7):
        sf_s.step()
        t_s.step()
    sd = copy.deepcopy(sf_s.state_dict())
    # a fresh optimizer and scheduler picking up both state dicts continue identically
    for source in (sd, t_s.state_dict()):
        opt2, _ = _opts(kind)
        opt2.load_state_dict(copy.deepcopy(sf_opt.state_dict()))
        s2 = make(S, opt2)
        s2.load_state_dict(copy.deepcopy(source))
        opt3 = copy.deepcopy(t_opt)
        s3 = make(T, opt3)
        s3.load_state_dict(t_s.state_dict())
        for step in range(15):
            s2.step()
            s3.step()
            _assert_same(opt2, opt3, s2, s3, step)


def test_onecycle_past_total_steps_and_bad_options():
    sf_opt, _ = _opts()
    s = S.OneCycleLR(sf_opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        s.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        s.step()
    with pytest.raises(ValueError, match="total_steps OR"):
        S.OneCycleLR(sf_opt, max_lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        S.OneCycleLR(sf_opt, max_lr=0.1, total_steps=5, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr must have the same length"):
        S.OneCycleLR(sf_opt, max_lr=[0.1], total_steps=5)
    ada = optim.Adadelta([sf.tensor([1.0], requires_grad=True)])
    with pytest.raises(ValueError, match="momentum or beta1"):
        S.CyclicLR(ada, 0.01, 0.1)
    with pytest.raises(ValueError, match="T_0"):
        S.CosineAnnealingWarmRestarts(sf_opt, T_0=0)
    with pytest.raises(ValueError, match="Factor"):
        S.ReduceLROnPlateau(sf_opt, factor=1.0)
    with pytest.raises(ValueError, match="unknown"):
        S.ReduceLROnPlateau(sf_opt, mode="up")


def test_warm_restarts_fractional_epochs():
    sf_opt, t_opt = _opts()
    sf_s = S.CosineAnnealingWarmRestarts(sf_opt, T_0=4, T_mult=2, eta_min=0.01)
    t_s = T.CosineAnnealingWarmRestarts(t_opt, T_0=4, T_mult=2, eta_min=0.01)
    for e in np.arange(0, 30, 0.35):
        sf_s.step(float(e))
        t_s.step(float(e))
        _assert_same(sf_opt, t_opt, sf_s, t_s, e)


PLATEAU = [dict(), dict(mode="max", factor=0.5, patience=2, threshold=0.05),
           dict(patience=1, threshold_mode="abs", threshold=0.1, cooldown=2,
                min_lr=[0.01, 0.005]),
           dict(mode="max", threshold_mode="abs", patience=0, factor=0.3, min_lr=0.004,
                eps=1e-3)]


@pytest.mark.parametrize("kw", PLATEAU)
def test_reduce_on_plateau_matches_torch(kw):
    rng = np.random.default_rng(3)
    metrics = np.concatenate([np.linspace(1.0, 0.5, 8), 0.5 + 0.02 * rng.standard_normal(40),
                              np.linspace(0.5, 0.2, 10), np.full(20, 0.2)])
    sf_opt, t_opt = _opts()
    sf_s, t_s = S.ReduceLROnPlateau(sf_opt, **kw), T.ReduceLROnPlateau(t_opt, **kw)
    for i, m in enumerate(metrics):
        sf_s.step(sf.tensor(m) if i % 2 else m)
        t_s.step(m)
        _assert_same(sf_opt, t_opt, sf_s, t_s, i)
        assert sf_s.num_bad_epochs == t_s.num_bad_epochs and sf_s.best == t_s.best
        if i == 30:  # a round trip through state_dict midway, and torch's state_dict
            opt2, _ = _opts()
            opt2.load_state_dict(sf_opt.state_dict())
            s2 = S.ReduceLROnPlateau(opt2)
            s2.load_state_dict(copy.deepcopy(t_s.state_dict()))
            sf_opt, sf_s = opt2, s2
    assert sf_opt.param_groups[0]["lr"] < 0.1  # the schedule did reduce
