"""Broadcast operands widened for long inner loops: the same values, and only where it pays."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import shapeflow as sf
from shapeflow.ops.elementwise.broadcast_runs import widen_runs


@settings(max_examples=120, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=5), data=st.data(),
       scale=st.sampled_from([1, 8, 40]))
def test_widened_operands_give_numpys_result_bit_for_bit(shape, data, scale):
    shape = [shape[0] * scale] + shape[1:]  # outputs on both sides of the size threshold
    keep_a = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    keep_b = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    lead = data.draw(st.integers(0, len(shape) - 1))
    rng = np.random.default_rng(0)
    a = rng.standard_normal([s if k else 1 for s, k in zip(shape, keep_a)]).astype(np.float32)
    b = rng.standard_normal([s if k else 1 for s, k in zip(shape, keep_b)][lead:])
    wa, wb = widen_runs(a, b)
    for w, x in ((wa, a), (wb, b)):  # a widened operand broadcasts to what it replaced
        assert w is x or (w.ndim >= x.ndim and w.flags.c_contiguous)
    np.testing.assert_array_equal(np.multiply(wa, wb), np.multiply(a, b))
    np.testing.assert_array_equal(np.subtract(wb, wa), np.subtract(b, a))


def test_rotary_tables_are_widened_and_the_rest_left_alone():
    x = np.ones((8, 64, 8, 4), np.float32)
    cos = np.ones((64, 1, 4), np.float32)
    _, w = widen_runs(x, cos)
    assert w.shape == (1, 64, 8, 4)  # dense over T, H, D/2: one long loop
    bias = np.ones(64, np.float32)
    assert widen_runs(np.ones((512, 64), np.float32), bias)[1] is bias  # long last dim
    chan = np.ones((64, 1, 1), np.float32)
    assert widen_runs(np.ones((32, 64, 8, 8), np.float32), chan)[1] is chan  # H*W is one run
    small = np.ones(4, np.float32)
    assert widen_runs(np.ones((16, 4), np.float32), small)[1] is small  # too small to pay


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "pow"])
def test_binary_ops_with_short_broadcast_runs_match_pytorch(op, rng):
    a = rng.standard_normal((6, 32, 4, 4)).astype(np.float32)
    b = (rng.random((32, 1, 4)) + 0.5).astype(np.float32)
    if op == "pow":
        a = np.abs(a)
    x, y = sf.tensor(a, requires_grad=True), sf.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, tout = getattr(sf, op)(x, y), getattr(torch, op)(tx, ty)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-6)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-5, atol=1e-5)
