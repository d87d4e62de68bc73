"""The device seam: a third device defined here, in the test, runs ops, backward and `.to()`.

Nothing under src/shapeflow names this device: if an op branched on `device is cpu`, its
kernel would not run here (or would leave cpu arrays behind) and these tests would fail.
"""

import pickle

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.device import Device, get_device, register_device, unregister_device
from shapeflow.errors import DeviceError


class CopyDevice(Device):
    """A toy device computing with NumPy (Device's defaults) in memory of its own: moving a
    tensor there or back copies it. This class and its registration are the whole device."""

    __slots__ = ()
    moved_in = 0  # arrays copied onto the device

    def from_numpy(self, array):
        type(self).moved_in += 1
        return np.array(array)

    def to_numpy(self, data):
        return np.array(data)


@pytest.fixture
def dev():
    d = register_device(CopyDevice("cpu-copy"))
    yield d
    unregister_device(d)


def _on_device(t) -> bool:
    return t.device is get_device("cpu-copy") and type(t._data) is np.ndarray


def test_the_device_is_found_by_name_and_compares_as_its_string(dev):
    assert sf.device("cpu-copy") is dev and dev == "cpu-copy" and dev.computes
    assert pickle.loads(pickle.dumps(dev)) is dev
    x = sf.ones(2, 3, device="cpu-copy")
    assert x.device == "cpu-copy" and _on_device(x)
    assert "device=cpu-copy" in repr(x)


def test_unregistered_it_is_unknown():
    with pytest.raises(DeviceError, match="unknown device 'cpu-copy'"):
        sf.device("cpu-copy")


def test_ops_and_backward_run_there_and_match_cpu(dev):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    results = {}
    for name in ("cpu", "cpu-copy"):
        x = sf.tensor(a, device=name, requires_grad=True)
        w = sf.tensor(b, device=name, requires_grad=True)
        h = (x @ w).relu() * 2.0 + x.sum(dim=1, keepdim=True)
        loss = sf.nn.functional.log_softmax(h, dim=-1).mean() + (h ** 2).sum() / 10
        loss.backward()
        results[name] = (loss, h, x.grad, w.grad)
    for t_cpu, t_dev in zip(results["cpu"], results["cpu-copy"]):
        assert _on_device(t_dev), (t_dev.device, type(t_dev._data))
        np.testing.assert_array_equal(t_dev.detach().numpy(), t_cpu.detach().numpy())


def test_a_model_trains_there_as_on_cpu(dev):
    def train(device):
        sf.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3))
        model.to(device)
        opt = sf.optim.AdamW(model.parameters(), lr=1e-2)
        x = sf.randn(16, 4).to(device)
        y = sf.randint(0, 3, (16,)).to(device)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, model

    cpu_losses, _ = train("cpu")
    dev_losses, model = train("cpu-copy")
    assert dev_losses == cpu_losses
    assert all(_on_device(p) and _on_device(p.grad) for p in model.parameters())


def test_to_moves_through_host_memory_and_back(dev):
    x = sf.arange(6.0).reshape(2, 3)
    before = CopyDevice.moved_in
    y = x.to("cpu-copy")
    assert _on_device(y) and CopyDevice.moved_in == before + 1
    x._data[0, 0] = 100.0  # a copy: the device's memory does not follow the host's
    assert y[0, 0].item() == 0.0
    z = y.to("cpu")
    assert z.device is sf.cpu
    np.testing.assert_array_equal(z.numpy(), np.arange(6.0).reshape(2, 3))
    m = y.to("meta")
    assert m.is_meta and m._data is None
    with pytest.raises(DeviceError, match="meta tensor .* to cpu-copy: it has no data"):
        m.to("cpu-copy")


def test_mixing_devices_is_a_device_error(dev):
    with pytest.raises(DeviceError, match="different devices"):
        sf.ones(2) + sf.ones(2, device="cpu-copy")


def test_factories_follow_its_context_and_indexing_writes_there(dev):
    with sf.device("cpu-copy"):
        x = sf.zeros(2, 3)
        e = sf.eye(3)
    assert _on_device(x) and _on_device(e)
    x[0] = 5.0  # a number written through the device's own array
    x[1, 1:] = sf.tensor([1.0, 2.0], device="cpu-copy")
    assert _on_device(x)
    assert x.tolist() == [[5.0, 5.0, 5.0], [0.0, 1.0, 2.0]]
    w = sf.where(x > 1.0, x, 0.0)  # a number made a tensor on the operand's device
    assert _on_device(w) and w.tolist() == [[5.0, 5.0, 5.0], [0.0, 0.0, 2.0]]


def test_save_and_load_to_it(dev, tmp_path):
    x = sf.arange(4.0, device="cpu-copy")
    sf.save({"x": x}, tmp_path / "x.sf")
    y = sf.load(tmp_path / "x.sf", map_location="cpu-copy")["x"]
    assert _on_device(y) and y.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert sf.load(tmp_path / "x.sf")["x"].device is sf.cpu
