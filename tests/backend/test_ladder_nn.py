"""The cpu table counts which rung ran for the nn kernels: norms, softmax, losses.

Each test runs an op and reads the calls it added to the table's counts: the compiled C
where it applies, NumPy where the compiled kernels are off (as SHAPEFLOW_KERNELS=0 turns
them off) or decline (a strided input, a dtype or option they do not cover).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import conv_kernels, kernels
from shapeflow.backend.cpu.ladder import table
from shapeflow.backend.reference import ReferenceKernels
from shapeflow.nn import functional as F

needs_kernels = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")


def ran(fn) -> Counter:
    """The (kernel, path) calls fn() added to the cpu table's counts."""
    before = Counter(table.stats)
    fn()
    after = Counter(table.stats)
    after.subtract(before)
    return +after  # only what ran


def without_kernels(fn):
    """fn() with the compiled kernels off (NumPy alone), as both_paths runs it."""
    old = kernels.set_enabled(False)
    try:
        return fn()
    finally:
        kernels.set_enabled(old)


def _x(*shape, seed=0, dtype=sf.float32):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return sf.tensor(a).to(dtype).requires_grad_()


@needs_kernels
def test_layer_norm_forward_and_backward_run_compiled():
    x, w, g = _x(8, 16), _x(16, seed=1), _x(8, 16, seed=2).detach()
    got = ran(lambda: F.layer_norm(x, (16,), w).backward(g))  # a dense upstream gradient
    assert got["layer_norm", "compiled"] == 1 and got["layer_norm_backward", "compiled"] == 1
    assert got["layer_norm", "numpy"] == 0


@needs_kernels
def test_a_broadcast_upstream_gradient_still_runs_the_compiled_backward():
    # y.sum().backward() hands layer/batch norm a zero-stride gradient: it is made dense at
    # the kernel's door rather than sending the backward down the NumPy path
    x, w = _x(8, 16), _x(16, seed=1)
    got = ran(lambda: F.layer_norm(x, (16,), w).sum().backward())
    assert got["layer_norm_backward", "compiled"] == 1
    assert got["layer_norm_backward", "numpy"] == 0
    expected = x.grad.numpy().copy()
    x.grad = None
    F.layer_norm(x, (16,), w).backward(sf.ones(8, 16))
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    b = _x(8, 4, 5)
    got = ran(lambda: F.batch_norm(b, None, None, training=True).sum().backward())
    assert got["batch_norm_backward", "compiled"] == 1
    assert got["batch_norm_backward", "numpy"] == 0


def test_layer_norm_without_kernels_runs_numpy():
    x = _x(8, 16)
    got = ran(lambda: without_kernels(lambda: F.layer_norm(x, (16,)).sum().backward()))
    assert got["layer_norm", "numpy"] == 1 and got["layer_norm_backward", "numpy"] == 1
    assert got["layer_norm", "compiled"] == 0


@needs_kernels
def test_layer_norm_of_strided_rows_runs_numpy_with_the_same_values():
    x = _x(8, 32).detach()[:, :16]  # rows 32 apart: a view the C kernel does not take
    got = ran(lambda: F.layer_norm(x, (16,)))
    assert got["layer_norm", "numpy"] == 1 and got["layer_norm", "compiled"] == 0
    dense = F.layer_norm(x.contiguous(), (16,))
    np.testing.assert_allclose(F.layer_norm(x, (16,)).numpy(), dense.numpy(), atol=1e-5)


@needs_kernels
def test_rms_norm_counts_under_its_own_name():
    got = ran(lambda: F.rms_norm(_x(4, 8).detach(), (8,)))
    assert got["rms_norm", "compiled"] == 1 and got["layer_norm", "compiled"] == 0


@needs_kernels
def test_batch_norm_compiled_when_training_numpy_with_running_stats():
    x, g = _x(4, 3, 5), _x(4, 3, 5, seed=1).detach()
    got = ran(lambda: F.batch_norm(x, None, None, training=True).backward(g))
    assert got["batch_norm", "compiled"] == 1 and got["batch_norm_backward", "compiled"] == 1
    rm, rv = sf.zeros(3), sf.ones(3)
    got = ran(lambda: F.batch_norm(x.detach(), rm, rv, training=False))
    assert got["batch_norm", "numpy"] == 1 and got["batch_norm", "compiled"] == 0


@pytest.mark.skipif(not conv_kernels.available(), reason="compiled conv kernels not in use")
def test_instance_norm_runs_the_conv_kernels():
    x, g = _x(2, 3, 4, 4), _x(2, 3, 4, 4, seed=1).detach()
    got = ran(lambda: F.instance_norm(x).backward(g))
    assert got["instance_norm", "compiled"] == 1
    assert got["instance_norm_backward", "compiled"] == 1


@needs_kernels
def test_softmax_bfloat16_rows_compiled_float32_numpy_backward_compiled():
    x = _x(4, 8, dtype=sf.bfloat16).detach()
    got = ran(lambda: F.softmax(x, -1))
    assert got["softmax", "compiled"] == 1 and got["softmax", "numpy"] == 0
    y = _x(4, 8)
    got = ran(lambda: (F.softmax(y, -1) * _x(4, 8, seed=2).detach()).sum().backward())
    assert got["softmax", "numpy"] == 1  # float32 forward: NumPy's blocked rows by design
    assert got["softmax_backward", "compiled"] == 1
    got = ran(lambda: F.log_softmax(y.detach(), 0))
    assert got["log_softmax", "numpy"] == 1


@needs_kernels
def test_cross_entropy_compiled_for_class_indices_numpy_with_label_smoothing():
    x, t = _x(6, 5), sf.tensor([0, 4, 1, 2, 3, 0])
    got = ran(lambda: F.cross_entropy(x, t).backward())
    assert got["cross_entropy", "compiled"] == 1
    assert got["cross_entropy_backward", "compiled"] == 1
    got = ran(lambda: F.cross_entropy(x, t, label_smoothing=0.1).backward())
    assert got["cross_entropy", "numpy"] == 1 and got["cross_entropy_backward", "numpy"] == 1


def test_the_reference_table_counts_its_own_path():
    k = ReferenceKernels(np)
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    y, mean, rstd = k.layer_norm(a, None, None, 1e-5)
    k.softmax(a, 1)
    assert k.stats == Counter({("layer_norm", "reference"): 1, ("softmax", "reference"): 1})
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-6)


def test_embedding_backward_reference_sums_repeats_in_order_as_add_at():
    rng = np.random.default_rng(1)
    flat, rows = rng.integers(0, 6, 40), rng.standard_normal((40, 3)).astype(np.float32)
    want = np.zeros((6, 3), np.float32)
    np.add.at(want, flat, rows)
    got = ReferenceKernels(np).embedding_backward(flat, rows, 6)
    assert got.tobytes() == want.tobytes()
