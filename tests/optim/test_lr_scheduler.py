"""LR schedulers against torch.optim.lr_scheduler: the lr of every group at every step."""

import copy
import warnings

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import optim
from shapeflow.optim import lr_scheduler as S

STEPS = 30
T = torch.optim.lr_scheduler


def _opts(lrs=(0.1, 0.02)):
    sf_ps = [sf.tensor([1.0], requires_grad=True) for _ in lrs]
    t_ps = [torch.tensor([1.0], requires_grad=True) for _ in lrs]
    sf_opt = optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(sf_ps, lrs)], lr=1.0)
    t_opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(t_ps, lrs)], lr=1.0)
    return sf_opt, t_opt


def _lr_fn(e):
    return 0.95**e if e % 3 else 1.0 / (e + 1)


class Warmup:  # a callable object: LambdaLR saves its __dict__
    def __init__(self, n):
        self.n = n

    def __call__(self, e):
        return min(1.0, (e + 1) / self.n)


SCHEDULES = {
    "step": (lambda o: S.StepLR(o, step_size=4, gamma=0.5),
             lambda o: T.StepLR(o, step_size=4, gamma=0.5)),
    "multistep": (lambda o: S.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3),
                  lambda o: T.MultiStepLR(o, milestones=[3, 7, 7, 20], gamma=0.3)),
    "exponential": (lambda o: S.ExponentialLR(o, gamma=0.9),
                    lambda o: T.ExponentialLR(o, gamma=0.9)),
    "cosine": (lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
               lambda o: T.CosineAnnealingLR(o, T_max=10, eta_min=0.001)),
    "cosine_long": (lambda o: S.CosineAnnealingLR(o, T_max=50),
                    lambda o: T.CosineAnnealingLR(o, T_max=50)),
    "lambda": (lambda o: S.LambdaLR(o, _lr_fn), lambda o: T.LambdaLR(o, _lr_fn)),
    "lambda_per_group": (lambda o: S.LambdaLR(o, [_lr_fn, Warmup(5)]),
                         lambda o: T.LambdaLR(o, [_lr_fn, Warmup(5)])),
    "linear": (lambda o: S.LinearLR(o, start_factor=0.1, total_iters=8),
               lambda o: T.LinearLR(o, start_factor=0.1, total_iters=8)),
    "linear_decay": (lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.2, total_iters=12),
                     lambda o: T.LinearLR(o, start_factor=1.0, end_factor=0.2,
                                          total_iters=12)),
    "constant": (lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
                 lambda o: T.ConstantLR(o, factor=0.5, total_iters=4)),
    "warmup_cosine": (
        lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.01, total_iters=5),
                                     S.CosineAnnealingLR(o, T_max=20, eta_min=1e-4)],
                                 milestones=[5]),
        lambda o: T.SequentialLR(o, [T.LinearLR(o, start_factor=0.01, total_iters=5),
                                     T.CosineAnnealingLR(o, T_max=20, eta_min=1e-4)],
                                 milestones=[5])),
    "three_phase": (
        lambda o: S.SequentialLR(o, [S.ConstantLR(o, factor=0.2, total_iters=3),
                                     S.ExponentialLR(o, gamma=0.8),
                                     S.StepLR(o, step_size=3, gamma=0.5)],
                                 milestones=[4, 12]),
        lambda o: T.SequentialLR(o, [T.ConstantLR(o, factor=0.2, total_iters=3),
                                     T.ExponentialLR(o, gamma=0.8),
                                     T.StepLR(o, step_size=3, gamma=0.5)],
                                 milestones=[4, 12])),
}


def _step_both(sf_opt, t_opt, sf_s, t_s):
    sf_opt.step()
    t_opt.step()
    sf_s.step()
    t_s.step()


def _check(sf_opt, t_opt, sf_s, t_s, step):
    np.testing.assert_allclose(sf_s.get_last_lr(), t_s.get_last_lr(), rtol=1e-12, atol=0,
                               err_msg=f"step {step}")
    np.testing.assert_allclose([g["lr"] for g in sf_opt.param_groups],
                               [g["lr"] for g in t_opt.param_groups], rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_matches_torch_step_by_step(name):
    make_sf, make_t = SCHEDULES[name]
    sf_opt, t_opt = _opts()
    sf_s, t_s = make_sf(sf_opt), make_t(t_opt)
    _check(sf_opt, t_opt, sf_s, t_s, 0)
    for step in range(1, STEPS + 1):
        _step_both(sf_opt, t_opt, sf_s, t_s)
        _check(sf_opt, t_opt, sf_s, t_s, step)
        assert sf_s.last_epoch == t_s.last_epoch


@pytest.mark.parametrize("name", ["step", "cosine", "lambda_per_group", "linear",
                                  "warmup_cosine", "three_phase"])
def test_state_dict_round_trip(name):
    make_sf, make_t = SCHEDULES[name]
    sf_opt, t_opt = _opts()
    sf_s, t_s = make_sf(sf_opt), make_t(t_opt)
    for _ in range(9):
        _step_both(sf_opt, t_opt, sf_s, t_s)
    sd = copy.deepcopy(sf_s.state_dict())
    assert "optimizer" not in sd
    # a fresh optimizer and scheduler resumed from the checkpoint
    # (PyTorch's order: build the scheduler, then load the optimizer, then the scheduler)
    sf_opt2, _ = _opts()
    sf_s2 = make_sf(sf_opt2)
    sf_opt2.load_state_dict(copy.deepcopy(sf_opt.state_dict()))
    sf_s2.load_state_dict(sd)
    for step in range(10, STEPS + 1):
        _step_both(sf_opt, t_opt, sf_s, t_s)
        sf_opt2.step()
        sf_s2.step()
        _check(sf_opt, t_opt, sf_s, t_s, step)
        np.testing.assert_allclose(sf_s2.get_last_lr(), t_s.get_last_lr(), rtol=1e-12)


def test_initial_lr_and_base_lrs():
    sf_opt, _ = _opts()
    s = S.StepLR(sf_opt, step_size=2)
    assert [g["initial_lr"] for g in sf_opt.param_groups] == [0.1, 0.02]
    assert s.base_lrs == [0.1, 0.02] and s.last_epoch == 0
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(_opts()[0], step_size=2, last_epoch=3)
    with pytest.raises(TypeError):
        S.StepLR(object(), step_size=2)
    with pytest.raises(ValueError):
        S.SequentialLR(sf_opt, [s], milestones=[3])
    with pytest.raises(ValueError):
        S.LinearLR(sf_opt, start_factor=0)


@pytest.mark.parametrize("name", ["step", "multistep", "exponential", "cosine", "linear"])
def test_step_with_epoch_uses_closed_form(name):
    make_sf, make_t = SCHEDULES[name]
    sf_opt, t_opt = _opts()
    sf_s, t_s = make_sf(sf_opt), make_t(t_opt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in (5, 2, 9, 13):
            sf_opt.step()
            t_opt.step()
            sf_s.step(epoch)
            t_s.step(epoch)
            _check(sf_opt, t_opt, sf_s, t_s, epoch)


def test_recursive_form_follows_manual_changes():
    sf_opt, t_opt = _opts()
    sf_s, t_s = S.ExponentialLR(sf_opt, 0.5), T.ExponentialLR(t_opt, 0.5)
    _step_both(sf_opt, t_opt, sf_s, t_s)
    sf_opt.param_groups[0]["lr"] = t_opt.param_groups[0]["lr"] = 1.0
    _step_both(sf_opt, t_opt, sf_s, t_s)
    _check(sf_opt, t_opt, sf_s, t_s, 2)
    assert sf_opt.param_groups[0]["lr"] == 0.5
