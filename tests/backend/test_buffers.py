"""backend.buffers: the NumPy buffer cache reuses large blocks and keeps every value."""

import contextvars
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from shapeflow.backend.cpu import buffers

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # NumPy 1.x
    from numpy.core.multiarray import get_handler_name

NAME = "shapeflow_buffer_cache"
MIB = 2**20

pytestmark = pytest.mark.skipif(buffers._alloc is None, reason="_alloc extension not built")


@pytest.fixture(autouse=True)
def cache_off(monkeypatch):
    """Each test starts from NumPy's allocator; the state found (on at import) comes back."""
    was_on = buffers.enabled()
    limits = buffers.stats()
    monkeypatch.delenv("SHAPEFLOW_BUFFER_CACHE", raising=False)
    buffers.disable()
    yield
    buffers.disable()
    assert get_handler_name() == "default_allocator"
    if was_on:
        buffers.enable(limits["max_bytes"], limits["min_cached"])


def test_shapeflow_turns_the_cache_on_at_import():
    code = ("import shapeflow, numpy as np; from numpy._core.multiarray import "
            "get_handler_name as h; print(h(np.empty(1 << 20)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ,
                                          "SHAPEFLOW_BUFFER_CACHE": ""}).stdout.strip()
    assert out == NAME


def delta(before: dict, key: str) -> int:
    return buffers.stats()[key] - before[key]


def test_enable_installs_handler():
    assert buffers.enable()
    assert buffers.enabled()
    assert get_handler_name() == NAME
    assert get_handler_name(np.empty(10)) == NAME
    assert get_handler_name(np.empty(MIB, np.uint8)) == NAME


def test_freed_block_is_reused_and_zeros_are_zero():
    buffers.enable()
    a = np.ones(MIB, np.uint8)
    address = a.ctypes.data
    assert address % 64 == 0
    del a
    s = buffers.stats()
    assert s["cached_blocks"] >= 1
    b = np.zeros(MIB, np.uint8)  # calloc on a dirty cached block
    assert delta(s, "hits") == 1
    assert b.ctypes.data == address
    assert not b.any()
    del b
    c = np.empty(MIB, np.uint8)
    assert c.ctypes.data == address
    assert delta(s, "hits") == 2


def test_small_blocks_bypass_cache():
    buffers.enable()
    s = buffers.stats()
    for _ in range(10):
        a = np.ones(1000)
        del a
    assert delta(s, "hits") == 0 and delta(s, "misses") == 0
    assert buffers.stats()["cached_bytes"] == s["cached_bytes"]


def test_values_survive_random_sizes_and_lifetimes():
    buffers.enable(max_bytes=16 * MIB)
    rng = np.random.default_rng(1)
    live = []
    for step in range(400):
        n = int(rng.choice([rng.integers(1, 4096), rng.integers(200_000, 700_000)]))
        kind = step % 4
        if kind == 0:
            a = np.zeros(n, np.uint8)
            assert not a.any()
            a[:] = rng.integers(0, 256, n, dtype=np.uint8)
        elif kind == 1:
            a = np.empty(n // 8 + 1, np.float64)
            a[:] = rng.standard_normal(a.size)
        elif kind == 2:
            a = np.arange(n // 4 + 1, dtype=np.int32) * 3 + step  # temporaries in between
        else:
            a = rng.integers(0, 256, n, dtype=np.uint8)
            a.resize(int(rng.integers(1, 700_000)), refcheck=False)
        live.append((a, a.tobytes()))
        if len(live) > 12 or rng.random() < 0.4:
            i = int(rng.integers(0, len(live)))
            arr, ref = live.pop(i)
            assert arr.tobytes() == ref
    for arr, ref in live:
        assert arr.tobytes() == ref
    assert buffers.stats()["hits"] > 0


@pytest.mark.parametrize("n0, n1", [
    (100, 300),            # small -> small
    (300, 100),
    (100, 200_000),        # small -> large
    (200_000, 100),        # large -> small
    (65_537, 65_990),      # large, same 4 KiB size class: stays in place
    (65_990, 65_537),
    (70_000, 400_000),     # large -> larger class
    (400_000, 70_000),
])
def test_resize_keeps_data(n0, n1):
    buffers.enable(min_cached=256 * 2**10)
    a = np.arange(n0, dtype=np.float64)
    address = a.ctypes.data
    a.resize(n1, refcheck=False)
    m = min(n0, n1)
    np.testing.assert_array_equal(a[:m], np.arange(m, dtype=np.float64))
    assert not a[m:].any()  # NumPy zeroes what it grew
    if (n0, n1) in ((65_537, 65_990), (65_990, 65_537)):
        assert a.ctypes.data == address
    a.resize(n0, refcheck=False)
    np.testing.assert_array_equal(a[:m], np.arange(m, dtype=np.float64))


def test_cap_is_respected_and_evictions_counted():
    buffers.enable(max_bytes=4 * MIB)
    s = buffers.stats()
    arrays = [np.empty(MIB, np.uint8) for _ in range(8)]
    del arrays
    now = buffers.stats()
    assert now["cached_bytes"] <= 4 * MIB
    assert now["cached_blocks"] == 4
    assert delta(s, "evictions") == 4
    big = np.empty(8 * MIB, np.uint8)  # above max_bytes: released, not cached
    del big
    assert delta(s, "dropped") == 1
    assert buffers.stats()["cached_bytes"] <= 4 * MIB


def test_reenable_updates_limits_and_keeps_default_to_restore():
    buffers.enable(max_bytes=8 * MIB)
    arrays = [np.empty(MIB, np.uint8) for _ in range(6)]
    del arrays
    assert buffers.stats()["cached_bytes"] == 6 * MIB
    assert buffers.enable(max_bytes=2 * MIB, min_cached=300_000)
    s = buffers.stats()
    assert s["max_bytes"] == 2 * MIB
    assert s["min_cached"] == 303_104  # rounded up to 4 KiB
    assert s["cached_bytes"] <= 2 * MIB
    assert get_handler_name() == NAME
    buffers.disable()
    assert get_handler_name() == "default_allocator"


def test_clear_empties_cache():
    buffers.enable()
    arrays = [np.empty(MIB + 4096 * i, np.uint8) for i in range(5)]
    del arrays
    assert buffers.stats()["cached_blocks"] == 5
    buffers.clear()
    s = buffers.stats()
    assert s["cached_blocks"] == 0 and s["cached_bytes"] == 0
    assert buffers.enabled()


def test_disable_restores_default_and_frees_old_arrays():
    buffers.enable()
    old = np.full(MIB, 7, np.uint8)
    small = np.full(10, 3, np.uint8)
    assert get_handler_name(old) == NAME
    buffers.disable()
    assert not buffers.enabled()
    assert get_handler_name() == "default_allocator"
    assert get_handler_name(np.empty(MIB, np.uint8)) == "default_allocator"
    assert get_handler_name(old) == NAME
    assert (old == 7).all() and (small == 3).all()
    old.resize(2 * MIB, refcheck=False)
    assert (old[:MIB] == 7).all()
    del old, small  # freed by the cache's handler, which now releases them
    assert buffers.stats()["cached_blocks"] == 0


def test_threads_allocate_and_free_concurrently():
    buffers.enable(max_bytes=8 * MIB)
    shared = [np.full(300_000 + 4096 * i, i, np.uint8) for i in range(8)]
    errors, names = [], []

    def work(seed, mine):
        rng = np.random.default_rng(seed)
        names.append(get_handler_name())
        try:
            for i in range(150):
                n = int(rng.integers(100_000, 600_000))
                a = np.full(n, i % 251, np.uint8)
                b = a + 1
                if not ((a == i % 251).all() and (b == i % 251 + 1).all()):
                    errors.append((seed, i))
                del a, b
            if not (mine == seed).all():
                errors.append((seed, "shared"))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(work, k, shared[k]))
               for k in range(4)]
    for t in threads:
        t.start()
    del shared  # the threads hold the last references to theirs, the rest are freed here
    for t in threads:
        t.join()
    assert errors == []
    assert names == [NAME] * 4


def test_env_var_zero_disables(monkeypatch):
    monkeypatch.setenv("SHAPEFLOW_BUFFER_CACHE", "0")
    assert buffers.enable() is False
    assert not buffers.enabled()
    assert get_handler_name() == "default_allocator"


def test_bad_limits_raise():
    with pytest.raises(ValueError):
        buffers.enable(min_cached=0)
    with pytest.raises(ValueError):
        buffers.enable(max_bytes=-1)
    assert not buffers.enabled()
