"""backend.gemm's few-row path (a decode batch or the logits rows times a wide or big weight):
padded rows and column blocks give torch's values, in a fresh C-ordered array."""

import numpy as np
import pytest
import torch

from shapeflow.backend.cpu import gemm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transposed", [True, False])
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 16, 17])
@pytest.mark.parametrize("shape", [(9000, 300), (1100, 1000)])  # wide; big (3 rows padded)
def test_few_rows_match_torch(dtype, transposed, rows, shape):
    rng = np.random.default_rng(rows)
    n, k = shape
    w = rng.standard_normal((n, k)).astype(dtype)  # torch's [out, in]
    b = w.T if transposed else np.ascontiguousarray(w.T)
    a = rng.standard_normal((rows, k)).astype(dtype)
    bias = rng.standard_normal(n).astype(dtype)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    for bb in (None, bias):
        want = torch.nn.functional.linear(torch.from_numpy(a), torch.from_numpy(w),
                                          None if bb is None else torch.from_numpy(bb))
        got = gemm.matmul(a, b, bb)
        assert got.shape == (rows, n) and got.dtype == dtype and got.flags.c_contiguous
        np.testing.assert_allclose(got, want.numpy(), **tol)


def test_few_rows_of_a_strided_input():
    # the decode batch's hidden rows can be a view (rows of a bigger activation)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((9000, 256)).astype(np.float32)
    big = rng.standard_normal((6, 256)).astype(np.float32)
    a = big[::2]
    got = gemm.matmul(a, w.T)
    np.testing.assert_allclose(got, a.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4,
                               atol=1e-4)
