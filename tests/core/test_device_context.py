"""`with sf.device(...)`: the default device of factories and module constructors."""

import threading
import time
import tracemalloc

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import nn

META = sf.device("meta")

# the same call in shapeflow and in PyTorch, each given its own module
FACTORIES = {
    "zeros": lambda m: m.zeros(2, 3),
    "ones": lambda m: m.ones(2, 3),
    "empty": lambda m: m.empty(2, 3),
    "full": lambda m: m.full((2, 3), 1.5),
    "rand": lambda m: m.rand(2, 3),
    "randn": lambda m: m.randn(2, 3),
    "randint": lambda m: m.randint(0, 5, (2, 3)),
    "randperm": lambda m: m.randperm(4),
    "arange": lambda m: m.arange(5),
    "linspace": lambda m: m.linspace(0, 1, 5),
    "eye": lambda m: m.eye(3),
    "tensor": lambda m: m.tensor([1.5, 2.5]),
    "tensor of a tensor": lambda m: m.tensor(m.ones(2, device="cpu")),
    "as_tensor of an array": lambda m: m.as_tensor(np.ones(3)),
    "zeros_like of a cpu tensor": lambda m: m.zeros_like(m.ones(2, device="cpu")),
    "randn_like of a cpu tensor": lambda m: m.randn_like(m.ones(2, device="cpu")),
    "from_numpy": lambda m: m.from_numpy(np.ones(3)),
}


@pytest.mark.filterwarnings("ignore:To copy construct")  # PyTorch on torch.tensor(tensor)
@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("dev", ["meta", "cpu"])
def test_factories_follow_the_context_as_pytorchs_do(name, dev):
    make = FACTORIES[name]
    with torch.device(dev):
        expected = make(torch).device.type
    with sf.device(dev):
        got = make(sf).device
    assert got == expected
    assert got is sf.device(got)  # the shared Device object: ops compare devices by `is`
    assert make(sf).device is sf.cpu  # and outside the block, cpu again


def test_an_explicit_device_wins_over_the_context():
    with sf.device("meta"):
        assert sf.zeros(2, device="cpu").device is sf.cpu
        assert sf.tensor([1.0], device="cpu").device is sf.cpu
        assert nn.Linear(2, 3, device="cpu").weight.device is sf.cpu
        assert sf.zeros(2, device="cpu").numpy().tolist() == [0.0, 0.0]


def test_device_is_the_same_object_and_its_own_context():
    assert sf.device("cpu") is sf.cpu
    assert sf.device("meta") is sf.device("meta")
    with sf.device("meta") as d:
        assert d is sf.device("meta")
        assert sf.get_default_device() is d
    assert sf.get_default_device() is sf.cpu


def test_nested_contexts_restore_each_level():
    with sf.device("meta"):
        with sf.device("cpu"):
            assert sf.ones(1).device is sf.cpu
            with sf.device("meta"), sf.device("meta"):  # the same singleton twice
                assert sf.ones(1).device is META
            assert sf.ones(1).device is sf.cpu
        assert sf.ones(1).device is META
    assert sf.ones(1).device is sf.cpu


def test_an_exception_restores_the_default():
    with pytest.raises(sf.ShapeError), sf.device("meta"), sf.device("meta"):
        sf.zeros(-1)
    assert sf.get_default_device() is sf.cpu
    assert sf.zeros(1).device is sf.cpu


def test_the_default_is_per_thread():
    seen = {}

    def other():
        seen["before"] = sf.zeros(1).device
        with sf.device("meta"):
            entered.set()
            release.wait(5)
            seen["inside"] = sf.zeros(1).device
        seen["after"] = sf.zeros(1).device

    entered, release = threading.Event(), threading.Event()
    with sf.device("meta"):
        t = threading.Thread(target=other)
        t.start()
        entered.wait(5)
        with sf.device("cpu"):  # this thread's block does not touch the other's
            assert sf.zeros(1).device is sf.cpu
            release.set()
            t.join(5)
        assert sf.zeros(1).device is META
    assert seen == {"before": sf.cpu, "inside": META, "after": sf.cpu}


def test_set_default_device_is_what_blocks_return_to():
    try:
        sf.set_default_device("meta")
        assert sf.get_default_device() is META
        with sf.device("cpu"):
            assert sf.zeros(1).device is sf.cpu
        assert sf.zeros(1).device is META
    finally:
        sf.set_default_device(None)
    assert sf.get_default_device() is sf.cpu
    with pytest.raises(sf.DeviceError):
        sf.set_default_device("cuda")


def test_load_is_not_moved_by_the_context(tmp_path):
    """As torch.load: a checkpoint comes back on cpu, the context notwithstanding."""
    path = tmp_path / "t.safetensors"
    sf.save({"a": sf.ones(2)}, path)
    with sf.device("meta"):
        a = sf.load(path)["a"]
    assert a.device is sf.cpu and a.numpy().tolist() == [1.0, 1.0]


MODULES = {
    "Linear": lambda m: m.nn.Linear(4, 3),
    "Embedding": lambda m: m.nn.Embedding(10, 4),
    "LayerNorm": lambda m: m.nn.LayerNorm(4),
    "RMSNorm": lambda m: m.nn.RMSNorm(4),
    "Conv2d": lambda m: m.nn.Conv2d(3, 4, 3),
    "MultiheadAttention": lambda m: m.nn.MultiheadAttention(8, 2),
}


@pytest.mark.parametrize("name", MODULES)
def test_modules_build_their_parameters_and_buffers_on_meta(name):
    build = MODULES[name]
    with torch.device("meta"):
        ref = build(torch)
    with sf.device("meta"):
        m = build(sf)
    tensors = dict(m.named_parameters()) | dict(m.named_buffers())
    ref_tensors = dict(ref.named_parameters()) | dict(ref.named_buffers())
    assert sorted(tensors) == sorted(ref_tensors)
    for k, t in tensors.items():
        assert t.device is META, k
        assert tuple(t.shape) == tuple(ref_tensors[k].shape), k


@pytest.mark.parametrize("name", ["mlp", "vit", "gpt"])
def test_reference_models_build_on_meta(name):
    from shapeflow.models.registry import DEFAULTS

    cls_name, kwargs, _ = DEFAULTS[name]
    with sf.device("meta"):
        m = getattr(sf.models, cls_name)(**kwargs)
    devices = {t.device for t in [*m.parameters(), *m.buffers()]}
    assert devices == {META}


def test_gpt3_175b_builds_on_meta_in_seconds_without_its_weights():
    tracemalloc.start()
    try:
        start = time.perf_counter()
        with sf.device("meta"):
            m = sf.models.GPT(50304, 2048, 96, 96, 12288)  # vocab, block, layers, heads, d
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    params = list(m.parameters())
    assert {p.device for p in params} == {META}
    assert all(p._data is None for p in params)
    n = sum(p.numel() for p in params)
    assert 174e9 < n < 176e9
    assert peak < 200 * 2**20, f"{peak / 2**20:.0f} MiB traced"  # the weights would be 700 GB
    assert elapsed < 20, f"{elapsed:.1f} s (a fraction of a second on an idle machine)"
