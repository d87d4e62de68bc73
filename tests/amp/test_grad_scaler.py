"""sf.amp.GradScaler against torch.amp.GradScaler: the scale's trajectory on the same forced
overflows, skipped steps, unscale_ before clipping, state_dict, and out-of-order calls."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.amp.grad_scaler import GradScalerError, ScaleValueError

# per iteration: the factor the gradients are multiplied by (inf / nan force an overflow)
PATTERN = [1.0, float("inf"), 1.0, 1.0, 1.0, float("nan"), 1.0, 1.0, 1.0, 1.0, 1.0,
           float("inf"), float("inf"), 1.0, 1.0, 1.0]


def _run(fw, pattern, **kw):
    """A GradScaler'd SGD loop over `pattern` in framework `fw` (shapeflow or torch: the same
    names): the scale and the weights after each step, and the scaler."""
    w = fw.nn.Parameter(fw.ones(3))
    opt = fw.optim.SGD([w], lr=0.1)
    scaler = fw.amp.GradScaler("cpu", **kw)
    scales, weights = [], []
    for factor in pattern:
        opt.zero_grad()
        loss = (w * fw.tensor([1.0, 2.0, 3.0])).sum()
        scaler.scale(loss * factor).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(w.detach().numpy().copy())
    return scales, weights, scaler


@pytest.mark.parametrize("kw", [{}, {"init_scale": 8.0, "growth_interval": 3},
                                {"init_scale": 2.0**20, "growth_factor": 4.0,
                                 "backoff_factor": 0.25, "growth_interval": 2}])
def test_scale_trajectory_matches_torch(kw):
    ours, our_w, scaler = _run(sf, PATTERN, **kw)
    theirs, their_w, tscaler = _run(torch, PATTERN, **kw)
    assert ours == theirs
    np.testing.assert_allclose(np.array(our_w), np.array(their_w), rtol=1e-6)
    assert scaler.state_dict() == tscaler.state_dict()


def test_a_forced_overflow_skips_the_step_and_halves_the_scale():
    scales, weights, _ = _run(sf, [1.0, float("inf"), 1.0], init_scale=1024.0)
    assert scales == [1024.0, 512.0, 512.0]
    assert (weights[1] == weights[0]).all()  # skipped
    assert (weights[2] != weights[1]).all()  # training goes on


def test_unscale_before_clipping_then_step():
    w = sf.nn.Parameter(sf.ones(2))
    tw = torch.nn.Parameter(torch.ones(2))
    opt, topt = sf.optim.SGD([w], lr=1.0), torch.optim.SGD([tw], lr=1.0)
    scaler, tscaler = sf.amp.GradScaler(init_scale=64.0), torch.amp.GradScaler("cpu", 64.0)
    scaler.scale((w * sf.tensor([3.0, 4.0])).sum()).backward()
    tscaler.scale((tw * torch.tensor([3.0, 4.0])).sum()).backward()
    scaler.unscale_(opt)
    tscaler.unscale_(topt)
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())  # [3, 4], unscaled
    sf.nn.utils.clip_grad_norm_([w], 1.0)
    torch.nn.utils.clip_grad_norm_([tw], 1.0)
    scaler.step(opt)
    tscaler.step(topt)
    scaler.update()
    tscaler.update()
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-6)
    with pytest.raises(GradScalerError, match="_scale is None"):
        sf.amp.GradScaler().update()


def test_calls_out_of_order_raise_as_in_torch():
    w = sf.nn.Parameter(sf.ones(2))
    opt = sf.optim.SGD([w], lr=1.0)
    scaler = sf.amp.GradScaler()
    scaler.scale(w.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(GradScalerError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(GradScalerError, match="after step"):
        scaler.unscale_(opt)
    with pytest.raises(GradScalerError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(GradScalerError, match="Closure"):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(ScaleValueError):
        sf.amp.GradScaler(growth_factor=1.0)
    with pytest.raises(ScaleValueError):
        sf.amp.GradScaler(backoff_factor=1.0)


def test_float16_gradients_are_refused_as_in_torch():
    w = sf.nn.Parameter(sf.ones(2, dtype=sf.float16))
    opt = sf.optim.SGD([w], lr=1.0)
    scaler = sf.amp.GradScaler(init_scale=2.0)
    scaler.scale(w.sum()).backward()
    with pytest.raises(ScaleValueError, match="FP16 gradients"):
        scaler.unscale_(opt)


def test_state_dict_round_trip_and_torch_format():
    _, _, scaler = _run(sf, PATTERN[:5], init_scale=16.0, growth_interval=3)
    sd = scaler.state_dict()
    fresh = sf.amp.GradScaler()
    fresh.load_state_dict(sd)
    assert fresh.state_dict() == sd and fresh.get_scale() == scaler.get_scale()
    tscaler = torch.amp.GradScaler("cpu")
    tscaler.load_state_dict(sd)  # the same keys and meanings as PyTorch's
    assert tscaler.state_dict() == sd
    with pytest.raises(GradScalerError, match="empty"):
        fresh.load_state_dict({})
    off = sf.amp.GradScaler(enabled=False)
    assert off.state_dict() == {} and off.get_scale() == 1.0
    x = sf.ones(2)
    assert off.scale(x) is x


def test_new_scale_and_outputs_in_containers():
    scaler = sf.amp.GradScaler(init_scale=4.0)
    a, b = scaler.scale([sf.ones(1), (sf.ones(1, dtype=sf.float16),)])
    # as torch.amp.GradScaler: a 0-d float32 scale keeps a [1] float16 output float16
    assert a.item() == 4.0 and b[0].item() == 4.0 and b[0].dtype is sf.float16
    scaler.update(new_scale=2.0)
    assert scaler.get_scale() == 2.0
    scaler.update(new_scale=sf.tensor([8.0]))
    assert scaler.get_scale() == 8.0
    assert sf.GradScaler is sf.amp.GradScaler
