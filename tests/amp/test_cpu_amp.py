"""sf.cpu.amp and sf.cpu's functions, as torch.cpu.amp and torch.cpu: a ported program's
`torch.cpu.amp.autocast()` runs as it did, with PyTorch's deprecation warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import shapeflow as sf


def test_cpu_amp_autocast_is_amp_autocast_on_the_cpu():
    x, w = np.ones((4, 8), np.float32), np.full((3, 8), 0.5, np.float32)
    with pytest.warns(FutureWarning, match="sf.amp.autocast"):
        region = sf.cpu.amp.autocast()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        twin = torch.cpu.amp.autocast()
    assert isinstance(region, sf.amp.autocast) and region.fast_dtype is sf.bfloat16
    with region:
        out = sf.nn.functional.linear(sf.tensor(x), sf.tensor(w))
        assert sf.is_autocast_enabled()
    with twin:
        tout = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w))
    assert out.dtype is sf.bfloat16 and tout.dtype is torch.bfloat16
    np.testing.assert_array_equal(out.float().numpy(), tout.float().numpy())
    assert not sf.is_autocast_enabled()
    with pytest.warns(FutureWarning), sf.cpu.amp.autocast(enabled=False):
        assert not sf.is_autocast_enabled()


def test_cpu_amp_grad_scaler_takes_torchs_arguments():
    with pytest.warns(FutureWarning, match="sf.amp.GradScaler"):
        scaler = sf.cpu.amp.GradScaler(init_scale=8.0, growth_interval=3)
    assert isinstance(scaler, sf.amp.GradScaler) and scaler.get_scale() == 8.0
    assert scaler.state_dict()["growth_interval"] == 3


def test_cpu_device_answers_torch_cpus_questions():
    assert (sf.cpu.is_available(), sf.cpu.device_count(), sf.cpu.current_device()) == (
        torch.cpu.is_available(), torch.cpu.device_count(), torch.cpu.current_device())
    assert sf.cpu.synchronize() is None
