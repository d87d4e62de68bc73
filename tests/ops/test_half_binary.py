"""bfloat16 add/sub/mul/div run in float32 and round once: the bits ml_dtypes' own
element-by-element loops give, broadcasting and special values included."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import shapeflow as sf
from shapeflow.backend.cpu import kernels

BF16 = ml_dtypes.bfloat16
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38, 1.0,
                     -1.0, 2.0 ** -126, 65504.0], np.float32)


def _operands(shape_a, shape_b, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape_a) * 3).astype(np.float32)
    b = (rng.standard_normal(shape_b) * 3).astype(np.float32)
    a.reshape(-1)[:len(SPECIALS)] = SPECIALS[:a.size]
    b.reshape(-1)[-len(SPECIALS):] = SPECIALS[-b.size:]
    return a.astype(BF16), b.astype(BF16)


@pytest.mark.parametrize("op, fn", [("add", np.add), ("sub", np.subtract),
                                    ("mul", np.multiply), ("div", np.true_divide)])
@pytest.mark.parametrize("shapes", [((37, 129), (37, 129)), ((4, 1, 65), (7, 65)),
                                    ((300,), ())])
def test_bf16_arithmetic_has_ml_dtypes_bits(op, fn, shapes):
    a, b = _operands(*shapes, seed=len(op))
    with np.errstate(all="ignore"):
        want = fn(a, b)  # ml_dtypes: float32 arithmetic per element, rounded
        got = getattr(sf, op)(sf.tensor(a), sf.tensor(b))  # the specials overflow: expected
    assert got.dtype is sf.bfloat16
    np.testing.assert_array_equal(got.numpy().view(np.uint16), want.view(np.uint16))


def test_bf16_gradients_of_slices_add_up_as_ml_dtypes_does():
    rng = np.random.default_rng(3)
    x = sf.tensor(rng.standard_normal((6, 12)).astype(BF16)).requires_grad_()
    g = [rng.standard_normal((6, 8)).astype(BF16) for _ in range(2)]
    (x[:, :8] * sf.tensor(g[0])).sum().backward(retain_graph=False)
    x.grad = None
    parts = x[:, :8], x[:, 4:]  # overlapping slices: the overlap adds up
    (parts[0] * sf.tensor(g[0]) + 0).sum().add((parts[1] * sf.tensor(g[1])).sum()).backward()
    want = np.zeros((6, 12), BF16)
    want[:, :8] += g[0]
    want[:, 4:] += g[1]
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("shapes", [((5, 130), (5, 130)), ((3, 1, 40), (40,))])
def test_bf16_plus_float32_widens_exactly(shapes):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shapes[0]).astype(BF16)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    got = sf.tensor(a) + sf.tensor(b)
    assert got.dtype is sf.float32
    np.testing.assert_array_equal(got.numpy(), a.astype(np.float32) + b)


def test_bf16_arithmetic_keeps_no_whole_float32_copy():
    import tracemalloc

    rng = np.random.default_rng(8)
    a, b = (sf.tensor(rng.standard_normal((512, 1024)).astype(BF16)) for _ in range(2))
    a + b  # warm up
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        out = a * b
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    # float32 blocks (a few per block element), not three float32 copies (6 MiB here)
    assert peak - out.nbytes < 16 * kernels._BINARY_BLOCK < out.nbytes


def test_bf16_gradient_through_a_fancy_index_still_adds_up():
    x = sf.tensor(np.arange(6, dtype=np.float32).astype(BF16)).requires_grad_()
    idx = sf.tensor(np.array([1, 1, 4]))
    (x[idx] * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.float().numpy(), [0, 4, 0, 0, 2, 0])
