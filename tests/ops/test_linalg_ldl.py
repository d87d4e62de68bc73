"""linalg.ldl_factor / ldl_factor_ex / ldl_solve against PyTorch: LAPACK sytrf's
Bunch-Kaufman pivots (2x2 blocks included) and LD bit for bit in layout, info, solving with
broadcast batches, no derivatives, meta, and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.errors import DTypeError, GraphError, ShapeError


def _sym(shape, seed=0, small_diag=False) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal(shape)
    a = a + np.swapaxes(a, -1, -2)
    if small_diag:  # Bunch-Kaufman then takes 2x2 pivots and row interchanges
        n = shape[-1]
        a[..., np.arange(n), np.arange(n)] *= 0.01
    return a


CASES = [((1, 1), False), ((4, 4), False), ((6, 6), True), ((3, 7, 7), True),
         ((2, 1, 5, 5), True), ((12, 12), True), ((0, 0), False), ((0, 3, 3), False)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,small", CASES)
def test_factor_and_solve_as_torch(shape, small, dtype):
    a = _sym(shape, small_diag=small).astype(dtype)
    ld, piv, info = sf.linalg.ldl_factor_ex(sf.tensor(a))
    tl, tp, ti = torch.linalg.ldl_factor_ex(torch.tensor(a))
    tol = 1e-4 if dtype == "float32" else 1e-10
    assert ld.dtype.name == dtype and piv.dtype is sf.int32 and info.dtype is sf.int32
    np.testing.assert_array_equal(piv.numpy(), tp.numpy())
    np.testing.assert_array_equal(info.numpy(), ti.numpy())
    np.testing.assert_allclose(ld.numpy(), tl.numpy(), rtol=tol, atol=tol)
    ld2, piv2 = sf.linalg.ldl_factor(sf.tensor(a), hermitian=True)  # real: the same
    np.testing.assert_array_equal(piv2.numpy(), tp.numpy())
    b = np.random.default_rng(1).standard_normal(shape[:-1] + (3,)).astype(dtype)
    x = sf.linalg.ldl_solve(ld, piv, sf.tensor(b))
    want = torch.linalg.ldl_solve(tl, tp, torch.tensor(b))
    assert x.dtype.name == dtype and tuple(x.shape) == tuple(want.shape)
    np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=10 * tol, atol=10 * tol)


def test_two_by_two_pivots_are_taken():
    a = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])
    _, piv = sf.linalg.ldl_factor(sf.tensor(a))
    want = torch.linalg.ldl_factor(torch.tensor(a)).pivots.numpy()
    assert (want < 0).any()
    np.testing.assert_array_equal(piv.numpy(), want)


def test_solve_broadcasts_batches():
    a = _sym((3, 5, 5), seed=2, small_diag=True)
    b = np.random.default_rng(3).standard_normal((2, 1, 5, 4))
    ld, piv = sf.linalg.ldl_factor(sf.tensor(a))
    x = sf.linalg.ldl_solve(ld, piv, sf.tensor(b))
    assert tuple(x.shape) == (2, 3, 5, 4)
    np.testing.assert_allclose(x.numpy(), np.linalg.solve(a, b), rtol=1e-9, atol=1e-9)
    x64 = sf.linalg.ldl_solve(ld, piv.long(), sf.tensor(b))  # int64 pivots are taken too
    np.testing.assert_allclose(x64.numpy(), x.numpy())


def test_singular_info_and_errors():
    a = np.array([[1.0, 2.0], [2.0, 4.0]], "float32")
    ld, piv, info = sf.linalg.ldl_factor_ex(sf.tensor(a))
    tl, tp, ti = torch.linalg.ldl_factor_ex(torch.tensor(a))
    assert int(info) == int(ti) == 2
    np.testing.assert_array_equal(piv.numpy(), tp.numpy())
    np.testing.assert_allclose(ld.numpy(), tl.numpy())
    with pytest.raises(sf.linalg.LinAlgError, match="zero"):
        sf.linalg.ldl_factor(sf.tensor(a))
    with pytest.raises(sf.linalg.LinAlgError):
        sf.linalg.ldl_factor_ex(sf.zeros(2, 3, 3), check_errors=True)


def test_no_derivatives_as_torch():
    a = sf.tensor(_sym((3, 3)), requires_grad=True)
    ld, piv = sf.linalg.ldl_factor(a)
    with pytest.raises(GraphError, match="not implemented"):
        ld.sum().backward()
    b = sf.ones(3, 2, dtype=sf.float64, requires_grad=True)
    with pytest.raises(GraphError, match="not implemented"):
        sf.linalg.ldl_solve(ld.detach(), piv, b).sum().backward()


def test_meta():
    a = sf.zeros(2, 4, 4, device="meta", dtype=sf.float64)
    ld, piv, info = sf.linalg.ldl_factor_ex(a)
    assert tuple(ld.shape) == (2, 4, 4) and tuple(piv.shape) == (2, 4) and info.shape == (2,)
    assert piv.dtype is sf.int32 and ld.device.type == "meta"
    x = sf.linalg.ldl_solve(ld, piv, sf.zeros(3, 1, 4, 2, device="meta", dtype=sf.float64))
    assert tuple(x.shape) == (3, 2, 4, 2)


def test_bad_input():
    with pytest.raises(ShapeError, match="square"):
        sf.linalg.ldl_factor(sf.zeros(2, 3))
    with pytest.raises(DTypeError):
        sf.linalg.ldl_factor(sf.zeros(3, 3, dtype=sf.int64))
    ld, piv = sf.linalg.ldl_factor(sf.eye(3))
    with pytest.raises(ShapeError):
        sf.linalg.ldl_solve(ld, piv, sf.ones(3))
    with pytest.raises(DTypeError, match="same dtype"):
        sf.linalg.ldl_solve(ld, piv, sf.ones(3, 2, dtype=sf.float64))
    with pytest.raises(ShapeError, match="pivots"):
        sf.linalg.ldl_solve(ld, piv[:2], sf.ones(3, 2))
    with pytest.raises(ShapeError, match="3 by 3"):
        sf.linalg.ldl_solve(ld, piv, sf.ones(4, 2))
