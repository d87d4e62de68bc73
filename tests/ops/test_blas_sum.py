"""Sums by matrix-vector product: equal to NumPy's sums for every shape and dim split."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shapeflow as sf
from shapeflow.backend.cpu.blas_sum import _MAX_LEN, sum_over
from shapeflow.backend.cpu.ladder import table

row_sums, col_sums, row_means = table.row_sums, table.col_sums, table.row_means


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float64]), keepdims=st.booleans())
def test_sum_over_matches_numpy(shape, data, dtype, keepdims):
    x = np.random.default_rng(len(shape)).normal(size=shape).astype(dtype)
    nd = len(shape)
    k = data.draw(st.integers(0, nd))
    axes = data.draw(st.sampled_from([tuple(range(k)), tuple(range(nd - k, nd))]))
    out = sum_over(x, axes, keepdims)
    if not 0 < len(axes) < nd:
        assert out is None
        return
    ref = x.sum(axis=axes, keepdims=keepdims)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_allclose(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5)


def test_sum_over_declines_what_it_cannot_do():
    x = np.ones((3, 4, 5), np.float32)
    assert sum_over(np.ones((3, 17, 5), np.float32), (1,), False) is None  # a long middle dim
    assert sum_over(np.ones((3, 2, 256), np.float32), (1,), False) is None  # long slices
    assert sum_over(x.transpose(1, 0, 2), (0,), False) is None  # not C-contiguous
    assert sum_over(x.astype(np.float16), (0,), False) is None
    assert sum_over(x.astype(np.int64), (0,), False) is None


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=3, max_size=5), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float64]), keepdims=st.booleans())
def test_middle_sums_are_numpys_bit_for_bit(shape, data, dtype, keepdims):
    # repeat_kv's expand backward: [B, T, Hkv, rep, D] summed over rep, in NumPy's order
    x = np.random.default_rng(len(shape)).normal(size=shape).astype(dtype)
    i = data.draw(st.integers(1, len(shape) - 2))
    j = data.draw(st.integers(i + 1, len(shape) - 1))
    out = sum_over(x, tuple(range(i, j)), keepdims)
    ref = x.sum(axis=tuple(range(i, j)), keepdims=keepdims)
    if out is None:  # too many slices, or one-element slices (adjacent: NumPy's pairwise)
        assert math.prod(shape[i:j]) > 16 or math.prod(shape[j:]) == 1
        return
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)


def test_long_float32_sums_stay_pairwise():
    n = _MAX_LEN[np.dtype(np.float32)] * 4
    x = np.full((2, n), 0.1, np.float32)
    np.testing.assert_array_equal(row_sums(x), x.sum(axis=1))
    xt = x.T.copy()
    np.testing.assert_array_equal(col_sums(xt), xt.sum(axis=0))


def test_row_helpers_and_specials():
    x = np.array([[1.0, np.inf, 2.0], [np.nan, 0.0, 1.0], [1.0, 2.0, 3.0]], np.float32)
    s = row_sums(x)
    assert s[0] == np.inf and np.isnan(s[1]) and s[2] == 6.0
    np.testing.assert_array_equal(row_means(x[2:]), [[2.0]])
    np.testing.assert_array_equal(col_sums(np.zeros((0, 3), np.float32)), [0, 0, 0])


@pytest.mark.parametrize("dim", [0, -1, (0, 1), (1, 2)])
def test_tensor_sum_and_mean_use_it_and_agree_with_numpy(dim):
    x = np.random.default_rng(0).normal(size=(5, 6, 7)).astype(np.float32)
    t = sf.tensor(x)
    np.testing.assert_allclose(t.sum(dim).numpy(), x.sum(axis=dim), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t.mean(dim, keepdim=True).numpy(),
                               x.mean(axis=dim, keepdims=True), rtol=1e-5, atol=1e-6)
