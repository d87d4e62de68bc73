"""Bounded resources under misuse: flat memory over training, deep graphs, huge meta shapes,
and seeded runs that repeat bit for bit across processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.nn import functional as F


def rss_bytes() -> int:
    """This process's resident memory now (not its peak)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")


def _mlp_steps(steps: int, keep: list | None = None) -> list[int]:
    """RSS after each of `steps` MLP training steps; `keep` collects what a leak would keep."""
    sf.manual_seed(0)
    model = sf.nn.Sequential(sf.nn.Linear(64, 256), sf.nn.ReLU(), sf.nn.Dropout(0.1),
                             sf.nn.Linear(256, 10))
    opt = sf.optim.Adam(model.parameters(), lr=1e-3)
    x, t = sf.randn(32, 64), sf.randint(0, 10, (32,))
    sizes = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
        if keep is not None:
            keep.append(model[0].weight.grad.clone())  # 64 KiB a step
        sizes.append(rss_bytes())
    return sizes


@needs_proc
def test_rss_stays_flat_over_200_training_steps():
    _mlp_steps(30)  # warm up: buffer caches, lazily built tables, the allocator's arenas
    sizes = _mlp_steps(200)
    growth = sizes[-1] - sizes[20]
    assert growth < 4 << 20, f"RSS grew {growth / 2**20:.1f} MiB over 180 steps"


@needs_proc
def test_the_rss_guard_sees_a_leak():
    """The same measure on a loop that keeps 64 KiB a step: it must show (12 MiB). In a fresh
    process: a test worker's heap may hold enough freed memory to absorb the leak unseen."""
    code = ("from reliability.test_bounded_resources import _mlp_steps\n"
            "_mlp_steps(30)\n"
            "kept = []\n"
            "sizes = _mlp_steps(200, kept)\n"
            "print(sizes[-1] - sizes[20])\n")
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=tests, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert int(out.split()[-1]) > 4 << 20


def test_a_100000_op_chain_backward_within_the_default_recursion_limit():
    limit = sys.getrecursionlimit()
    x = sf.ones(4, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0001
    y.sum().backward()
    assert sys.getrecursionlimit() == limit  # nothing raised it to get through
    np.testing.assert_allclose(x.grad.numpy(), np.full(4, 1.0001**100_000), rtol=1e-2)
    del y  # freeing the chain must not recurse either


def test_a_100000_op_chain_with_create_graph():
    x = sf.ones(2, requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + x * 1e-6
    (g,) = sf.autograd.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), np.full(2, 1.1), rtol=1e-3)


@needs_proc
def test_1e12_element_meta_shapes_allocate_nothing():
    before = rss_bytes()
    a = sf.zeros(10**6, 10**6, device="meta")
    w = sf.nn.Linear(10**6, 10**6, device="meta")
    y = F.softmax(w(a) @ a.transpose(0, 1), -1).sum(0)
    h = sf.randn(10**6, 10**6, device="meta", requires_grad=True)
    (h * 2).sum().backward()
    assert a.numel() == 10**12 and a.nbytes == 4 * 10**12
    assert tuple(y.shape) == (10**6,) and tuple(h.grad.shape) == (10**6, 10**6)
    assert rss_bytes() - before < 64 << 20


def test_a_cpu_tensor_too_big_for_memory_names_itself_and_the_way_out():
    with pytest.raises(sf.DeviceError) as e:
        sf.zeros(10**6, 10**6)
    msg = str(e.value)
    assert "zeros" in msg and "[1000000, 1000000] float32" in msg
    assert "4,000,000,000,000 bytes" in msg and "meta" in msg
    assert isinstance(e.value, RuntimeError)  # PyTorch raises RuntimeError here
    with pytest.raises(sf.DeviceError, match="matmul|mul"):
        sf.ones(10**6, 1) * sf.ones(1, 10**6)  # an op's output, not a factory


_SEEDED_RUN = textwrap.dedent("""
    import hashlib, shapeflow as sf
    from shapeflow.nn import functional as F
    sf.manual_seed(1234)
    model = sf.nn.Sequential(sf.nn.Linear(16, 32), sf.nn.GELU(), sf.nn.Dropout(0.2),
                             sf.nn.Linear(32, 4))
    opt = sf.optim.AdamW(model.parameters(), lr=1e-2)
    data = sf.data.TensorDataset(sf.randn(64, 16), sf.randint(0, 4, (64,)))
    for x, t in sf.data.DataLoader(data, batch_size=8, shuffle=True):
        opt.zero_grad()
        F.cross_entropy(model(x), t).backward()
        opt.step()
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode()); h.update(p.numpy().tobytes())
    print(h.hexdigest())
""")


def test_seeded_runs_are_identical_across_processes():
    """Two fresh interpreters (different hash seeds: no set or dict order may matter)."""
    src = os.path.dirname(os.path.dirname(sf.__file__))
    outs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed,
               "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
        outs.append(subprocess.run([sys.executable, "-c", _SEEDED_RUN], env=env, check=True,
                                   capture_output=True, text=True, timeout=300).stdout)
    assert len(outs[0].strip()) == 64 and outs[0] == outs[1]
