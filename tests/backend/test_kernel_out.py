"""Every kernel writes into a buffer it is given (`out=`), on the cpu table and the portable one.

A caller that planned the memory (a compiled step's arena) hands each kernel its output
buffer: the kernel must return that buffer, holding what it would have returned, and a
product into a given buffer must allocate nothing of the result's size.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from shapeflow.backend.cpu.ladder import table as cpu_table
from shapeflow.backend.reference import ReferenceKernels

TABLES = {"cpu": cpu_table, "reference": ReferenceKernels(np, "numpy")}
rng = np.random.default_rng(0)
A, B = rng.standard_normal((64, 48), np.float32), rng.standard_normal((48, 32), np.float32)
X = rng.standard_normal((16, 40), np.float32)
W, BIAS = rng.standard_normal(40, np.float32), rng.standard_normal(40, np.float32)
S = rng.standard_normal((2, 4, 8, 8), np.float32)

CALLS = {  # kernel -> (call with out=..., what out= must be)
    "matmul": (lambda k, out: k.matmul(A, B, out=out), np.empty((64, 32), np.float32)),
    "matmul_bias": (lambda k, out: k.matmul_bias(A, B, BIAS[:32], out=out),
                    np.empty((64, 32), np.float32)),
    "bmm": (lambda k, out: k.bmm(S, S, out=out), np.empty(S.shape, np.float32)),
    "sum": (lambda k, out: k.sum(X, (0,), out=out), np.empty(40, np.float32)),
    "softmax": (lambda k, out: k.softmax(X, 1, out=out), np.empty(X.shape, np.float32)),
    "log_softmax": (lambda k, out: k.softmax(X, 1, log=True, out=out),
                    np.empty(X.shape, np.float32)),
    "silu": (lambda k, out: k.silu(X, out=out), np.empty(X.shape, np.float32)),
    "cast": (lambda k, out: k.cast(X, np.dtype(np.float64), out=out),
             np.empty(X.shape, np.float64)),
    "layer_norm": (lambda k, out: k.layer_norm(X, W, BIAS, 1e-5, out=out)[0],
                   (np.empty(X.shape, np.float32), None, None)),
    "pad2d": (lambda k, out: k.pad2d(S, (1, 1, 2, 0), out=out),
              np.empty((2, 4, 10, 10), np.float32)),
}


@pytest.mark.parametrize("table", list(TABLES))
@pytest.mark.parametrize("kernel", list(CALLS))
def test_the_kernel_writes_into_the_buffer_it_is_given(table, kernel):
    k = TABLES[table]
    call, buffer = CALLS[kernel]
    expected = np.array(call(k, None))
    got = call(k, buffer)
    target = buffer[0] if isinstance(buffer, tuple) else buffer
    assert got is target
    np.testing.assert_array_equal(target, expected)


def test_a_product_into_a_given_buffer_allocates_nothing_of_its_size():
    a, b = rng.standard_normal((512, 256), np.float32), rng.standard_normal((256, 512),
                                                                           np.float32)
    out = np.empty((512, 512), np.float32)  # 1 MiB
    cpu_table.matmul(a, b, out=out)  # warm: libraries loaded, counters made
    tracemalloc.start()
    try:
        cpu_table.matmul(a, b, out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
