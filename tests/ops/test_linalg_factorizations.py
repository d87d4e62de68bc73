"""LU and the torch.linalg solvers built on factorizations (lu family, triangular and
Cholesky solves, matrix_exp, the _ex variants, cond, vander, tensorinv/solve, lstsq)
against PyTorch: values, pivots, float64 gradients, finite differences, meta shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.errors import DTypeError, ShapeError
from shapeflow.ops.linalg import LinAlgError
from tests.ops.harness import assert_saved_matches_declared

# torch.lu_solve / triangular_solve warn that they are deprecated: they are the reference
pytestmark = pytest.mark.filterwarnings("ignore:.*deprecated")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _spd(*batch, n=4, seed=0):
    a = _rand(*batch, n, n, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _compare(sf_fn, torch_fn, *arrays, grad=True, seed=1, rtol=1e-7, atol=1e-9):
    """Values of every output, then gradients of sum(out * cotangent) for float inputs."""
    s_in = [sf.tensor(a, requires_grad=grad and a.dtype.kind == "f") if isinstance(a, np.ndarray)
            else a for a in arrays]
    t_in = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f")
            if isinstance(a, np.ndarray) else a for a in arrays]
    s_out, t_out = sf_fn(*s_in), torch_fn(*t_in)
    s_list = list(s_out) if isinstance(s_out, tuple) else [s_out]
    t_list = list(t_out) if isinstance(t_out, tuple) else [t_out]
    assert len(s_list) == len(t_list)
    for s, t in zip(s_list, t_list):
        assert tuple(s.shape) == tuple(t.shape), (s.shape, t.shape)
        assert str(s.dtype) == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol, atol)
    if not grad:
        return s_list
    for s in s_list:  # before backward, which frees what the nodes saved
        if s.requires_grad:
            assert_saved_matches_declared(s)
    rng = np.random.default_rng(seed)
    pairs = [(s, t) for s, t in zip(s_list, t_list) if t.requires_grad and t.numel()]
    cot = [rng.standard_normal(tuple(t.shape)) for _, t in pairs]
    wrt = [i for i, t in enumerate(t_in) if isinstance(t, torch.Tensor) and t.requires_grad]
    t_grads = torch.autograd.grad([t for _, t in pairs], [t_in[i] for i in wrt],
                                  [torch.tensor(c) for c in cot], allow_unused=True)
    terms = [(s * sf.tensor(c)).sum() for (s, _), c in zip(pairs, cot) if s.requires_grad]
    if not terms:  # empty outputs: nothing to compare
        return s_list
    sum(terms[1:], terms[0]).backward()
    for i, tg in zip(wrt, t_grads):
        if tg is None:
            assert s_in[i].grad is None or not s_in[i].grad.numpy().any()
            continue
        np.testing.assert_allclose(s_in[i].grad.numpy(), tg.numpy(), 1e-6, 1e-8)
    return s_list


# -- LU ---------------------------------------------------------------------------------------

LU_SHAPES = [(5, 5), (6, 4), (3, 5), (2, 3, 4, 4), (2, 5, 3), (0, 3, 3), (1, 1)]


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_values_pivots_and_gradient(shape):
    a = _rand(*shape)
    lu, piv = _compare(lambda x: tuple(sf.linalg.lu_factor(x)),
                       lambda x: tuple(torch.linalg.lu_factor(x)), a)
    assert piv.dtype == sf.int32
    np.testing.assert_array_equal(piv.numpy(), torch.linalg.lu_factor(torch.tensor(a))[1])


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_linalg_lu_and_unpack(shape):
    a = _rand(*shape)
    _compare(lambda x: tuple(sf.linalg.lu(x)), lambda x: tuple(torch.linalg.lu(x)), a)
    lu, piv = torch.linalg.lu_factor(torch.tensor(a))
    _compare(lambda x, p: tuple(sf.lu_unpack(x, p)), lambda x, p: tuple(torch.lu_unpack(x, p)),
             lu.numpy(), piv.numpy())


def test_lu_unpack_parts_left_out_are_empty():
    lu, piv = torch.linalg.lu_factor(torch.tensor(_rand(4, 3)))
    for kw in ({"unpack_data": False}, {"unpack_pivots": False}):
        ours = sf.lu_unpack(sf.tensor(lu.numpy()), sf.tensor(piv.numpy()), **kw)
        theirs = torch.lu_unpack(lu, piv, **kw)
        assert [tuple(t.shape) for t in ours] == [tuple(t.shape) for t in theirs]


def test_lu_ex_info_and_singular_errors():
    a = np.zeros((2, 3, 3))
    a[1] = np.eye(3)
    a[0, :, 0] = 1.0  # rank 1: U[2, 2] is the first zero pivot
    out = sf.linalg.lu_factor_ex(sf.tensor(a))
    ref = torch.linalg.lu_factor_ex(torch.tensor(a))
    np.testing.assert_array_equal(out.info.numpy(), ref.info.numpy())
    np.testing.assert_array_equal(out.pivots.numpy(), ref.pivots.numpy())
    np.testing.assert_allclose(out.LU.numpy(), ref.LU.numpy())
    with pytest.raises(LinAlgError, match="zero"):
        sf.linalg.lu_factor(sf.tensor(a))
    with pytest.raises(LinAlgError):
        sf.linalg.lu_factor_ex(sf.tensor(a), check_errors=True)
    with pytest.raises(ShapeError, match="pivoting"):
        sf.linalg.lu(sf.tensor(a), pivot=False)
    infos = sf.lu(sf.tensor(a), get_infos=True)
    assert type(infos).__name__ == "_lu_with_info" and infos.info.tolist() == [2, 0]
    lu_, piv = sf.tensor(a[1]).lu()
    assert piv.tolist() == [1, 2, 3]


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
@pytest.mark.parametrize("shapes", [((4, 4), (4, 2)), ((2, 3, 3), (3, 3)), ((3, 3), (2, 3, 1))])
def test_linalg_lu_solve(left, adjoint, shapes):
    a_shape, b_shape = shapes
    if not left:
        b_shape = b_shape[:-2] + b_shape[-2:][::-1]
    lu, piv = torch.linalg.lu_factor(torch.tensor(_rand(*a_shape)))
    b = _rand(*b_shape, seed=2)
    _compare(lambda x, p, y: sf.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint),
             lambda x, p, y: torch.linalg.lu_solve(x, p, y, left=left, adjoint=adjoint),
             lu.numpy(), piv.numpy(), b)


def test_torch_lu_solve_and_method():
    lu, piv = torch.linalg.lu_factor(torch.tensor(_rand(3, 4, 4)))
    b = _rand(3, 4, 2, seed=3)
    _compare(lambda y, x, p: sf.lu_solve(y, x, p), lambda y, x, p: torch.lu_solve(y, x, p),
             b, lu.numpy(), piv.numpy())
    ours = sf.tensor(b).lu_solve(sf.tensor(lu.numpy()), sf.tensor(piv.numpy()))
    np.testing.assert_allclose(ours.numpy(), torch.lu_solve(torch.tensor(b), lu, piv))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_lu_factor_gradient_by_finite_differences(shape):
    a = sf.tensor(_rand(*shape, seed=4), requires_grad=True)
    assert sf.autograd.gradcheck(lambda x: sf.linalg.lu_factor(x).LU, (a,))


# -- triangular and Cholesky solves ------------------------------------------------------------

@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_triangular_solve(upper, transpose, unitriangular):
    a = _rand(2, 4, 4) + 4 * np.eye(4)
    b = _rand(4, 3, seed=5)
    out = _compare(lambda y, x: tuple(sf.triangular_solve(y, x, upper, transpose, unitriangular)),
                   lambda y, x: tuple(torch.triangular_solve(y, x, upper, transpose,
                                                             unitriangular)), b, a)
    assert tuple(out[1].shape) == (2, 4, 4)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("shapes", [((4, 4), (4, 2)), ((2, 4, 4), (4, 1)), ((0, 3, 3), (0, 3, 2))])
def test_cholesky_solve_and_inverse(upper, shapes):
    a_shape, b_shape = shapes
    factor = torch.linalg.cholesky(torch.tensor(_spd(*a_shape[:-2], n=a_shape[-1])),
                                   upper=upper).numpy()
    b = _rand(*b_shape, seed=6)
    _compare(lambda y, f: sf.cholesky_solve(y, f, upper), lambda y, f: torch.cholesky_solve(
        y, f, upper), b, factor)
    _compare(lambda f: sf.cholesky_inverse(f, upper), lambda f: torch.cholesky_inverse(f, upper),
             factor)
    assert sf.tensor(factor).cholesky_inverse(upper).shape == a_shape


def test_cholesky_solve_gradient_by_finite_differences():
    # PyTorch's gradient is on the whole factor; differences see only the triangle read
    factor = sf.tensor(np.linalg.cholesky(_spd(n=3)), requires_grad=True)
    b = sf.tensor(_rand(3, 2), requires_grad=True)
    assert sf.autograd.gradcheck(lambda y, f: sf.cholesky_solve(y, f.tril()), (b, factor))
    assert sf.autograd.gradcheck(lambda f: sf.cholesky_inverse(f.tril()), (factor,))


# -- matrix_exp --------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1e-3, 1.0, 8.0])
@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 2), (0, 3, 3), (1, 1)])
def test_matrix_exp(scale, shape):
    a = _rand(*shape, seed=7) * scale
    _compare(sf.matrix_exp, torch.matrix_exp, a, rtol=1e-10)
    assert sf.linalg.matrix_exp is sf.matrix_exp and hasattr(sf.Tensor, "matrix_exp")


def test_matrix_exp_gradient_by_finite_differences():
    a = sf.tensor(_rand(3, 3, seed=8), requires_grad=True)
    assert sf.autograd.gradcheck(sf.matrix_exp, (a,))


# -- the _ex variants --------------------------------------------------------------------------

@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_reports_the_failing_minor(upper):
    a = np.stack([[[1.0, 2, 3], [2, 1, 0], [3, 0, 5]], 2 * np.eye(3)])
    ours = sf.linalg.cholesky_ex(sf.tensor(a), upper=upper)
    ref = torch.linalg.cholesky_ex(torch.tensor(a), upper=upper)
    np.testing.assert_array_equal(ours.info.numpy(), ref.info.numpy())
    np.testing.assert_allclose(ours.L.numpy(), ref.L.numpy())
    with pytest.raises(LinAlgError, match="positive-definite"):
        sf.linalg.cholesky_ex(sf.tensor(a), check_errors=True)
    _compare(lambda x: tuple(sf.linalg.cholesky_ex(x, upper=upper)),
             lambda x: tuple(torch.linalg.cholesky_ex(x, upper=upper)), _spd(2, n=3))


def test_inv_ex_and_solve_ex():
    a = np.stack([_rand(3, 3) + 3 * np.eye(3), np.zeros((3, 3))])
    inv = sf.linalg.inv_ex(sf.tensor(a))
    assert inv.info.tolist() == torch.linalg.inv_ex(torch.tensor(a)).info.tolist()
    np.testing.assert_allclose(inv.inverse.numpy()[0], np.linalg.inv(a[0]))
    assert np.isnan(inv.inverse.numpy()[1]).all()  # undefined where singular
    res = sf.linalg.solve_ex(sf.tensor(a), sf.tensor(np.ones((4, 1, 3, 1))))
    assert tuple(res.info.shape) == (2,) and res.info.tolist() == [0, 1]
    with pytest.raises(LinAlgError):
        sf.linalg.inv_ex(sf.tensor(a), check_errors=True)
    _compare(lambda x: tuple(sf.linalg.inv_ex(x)), lambda x: tuple(torch.linalg.inv_ex(x)), a[:1])
    for b in (_rand(3), _rand(2, 3, 2), _rand(2, 3)):
        _compare(lambda x, y: tuple(sf.linalg.solve_ex(x, y)),
                 lambda x, y: tuple(torch.linalg.solve_ex(x, y)), a[:1].repeat(2, 0), b)
    _compare(lambda x, y: tuple(sf.linalg.solve_ex(x, y, left=False)),
             lambda x, y: tuple(torch.linalg.solve_ex(x, y, left=False)), a[0], _rand(2, 3))


# -- cond, vander, tensorinv, tensorsolve ------------------------------------------------------

@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1])
def test_cond(p):
    a = _rand(2, 4, 4, seed=9)
    a[1, :, 0] = 0.0  # singular: inf for the norms of the inverse
    # PyTorch's gradient only exists for the singular-value p's
    _compare(lambda x: sf.linalg.cond(x, p), lambda x: torch.linalg.cond(x, p),
             a[:1] if p in (None, 2, -2) else a, grad=p in (None, 2, -2), rtol=1e-6)
    if p in (None, 2, -2):
        _compare(lambda x: sf.linalg.cond(x, p), lambda x: torch.linalg.cond(x, p),
                 _rand(3, 5, seed=10))


@pytest.mark.parametrize("n", [None, 2, 4])
@pytest.mark.parametrize("x", [np.array([0.0, 1.5, -2.0]), np.array([[0.0, 2.0], [1.0, 0.0]]),
                               np.array(3.0)])
def test_vander(n, x):
    if x.ndim == 0 and n is None:
        n = 3  # a scalar is one point: N defaults to 1, which PyTorch refuses
    _compare(lambda t: sf.linalg.vander(t, N=n), lambda t: torch.linalg.vander(t, N=n), x)
    ints = np.array([1, 2, 3])
    _compare(lambda t: sf.linalg.vander(t, N=n), lambda t: torch.linalg.vander(t, N=n), ints,
             grad=False)


def test_vander_errors():
    with pytest.raises(ShapeError, match="greater than 1"):
        sf.linalg.vander(sf.tensor([1.0]))
    with pytest.raises(DTypeError):
        sf.linalg.vander(sf.tensor([True, False]))


@pytest.mark.parametrize("shape,ind", [((4, 6, 8, 3), 2), ((6, 2, 3), 1), ((2, 3, 3, 2), 2)])
def test_tensorinv(shape, ind):
    _compare(lambda t: sf.linalg.tensorinv(t, ind), lambda t: torch.linalg.tensorinv(t, ind),
             _rand(*shape, seed=11))


@pytest.mark.parametrize("dims", [None, (0, 2)])
def test_tensorsolve(dims):
    _compare(lambda a, b: sf.linalg.tensorsolve(a, b, dims),
             lambda a, b: torch.linalg.tensorsolve(a, b, dims), _rand(2, 3, 6, seed=12),
             _rand(2, 3, seed=13))
    with pytest.raises(ShapeError):
        sf.linalg.tensorsolve(sf.tensor(_rand(2, 3, 5)), sf.tensor(_rand(2, 3)))


# -- lstsq -------------------------------------------------------------------------------------

@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((2, 3, 4), (2, 3, 2)), ((2, 4, 3), (2, 4)),
                                    ((3, 3), (3,))])
def test_lstsq(driver, shapes):
    a, b = _rand(*shapes[0], seed=14), _rand(*shapes[1], seed=15)
    _compare(lambda x, y: tuple(sf.linalg.lstsq(x, y, driver=driver)),
             lambda x, y: tuple(torch.linalg.lstsq(x, y, driver=driver)), a, b, rtol=1e-6)


def test_lstsq_rank_deficient_and_errors():
    a = _rand(5, 3, seed=16)
    a[:, 2] = a[:, 1]
    b = _rand(5, 2, seed=17)
    for driver in ("gelsd", "gelss"):
        ours = sf.linalg.lstsq(sf.tensor(a), sf.tensor(b), driver=driver)
        ref = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        assert ours.rank.item() == ref.rank.item() == 2
        assert tuple(ours.residuals.shape) == tuple(ref.residuals.shape) == (0,)
        np.testing.assert_allclose(ours.solution.numpy(), ref.solution.numpy(), 1e-8, 1e-10)
    with pytest.raises(ShapeError, match="driver"):
        sf.linalg.lstsq(sf.tensor(a), sf.tensor(b), driver="gelsx")
    with pytest.raises(DTypeError):
        sf.linalg.lstsq(sf.tensor(a), sf.tensor(b).float())


# -- meta and bad input ------------------------------------------------------------------------

def test_meta_shapes():
    a = sf.zeros(2, 5, 3, device="meta", dtype=sf.float64)
    sq = sf.zeros(2, 4, 4, device="meta", dtype=sf.float64)
    lu, piv, info = sf.linalg.lu_factor_ex(a)
    assert (lu.shape, piv.shape, piv.dtype, info.shape) == ((2, 5, 3), (2, 3), sf.int32, (2,))
    assert [t.shape for t in sf.linalg.lu(a)] == [(2, 5, 5), (2, 5, 3), (2, 3, 3)]
    assert sf.matrix_exp(sq).shape == (2, 4, 4)
    assert sf.cholesky_solve(sf.zeros(4, 2, device="meta"), sq.float()).shape == (2, 4, 2)
    assert sf.cholesky_inverse(sq).shape == (2, 4, 4)
    assert [t.shape for t in sf.triangular_solve(sf.zeros(4, 1, device="meta",
                                                          dtype=sf.float64), sq)] == [
        (2, 4, 1), (2, 4, 4)]
    assert [t.shape for t in sf.linalg.cholesky_ex(sq)] == [(2, 4, 4), (2,)]
    assert [t.shape for t in sf.linalg.inv_ex(sq)] == [(2, 4, 4), (2,)]
    assert sf.linalg.cond(sq).shape == (2,)
    assert sf.linalg.vander(sf.zeros(3, device="meta"), N=5).shape == (3, 5)


def test_bad_input_raises_shapeflow_errors():
    with pytest.raises(ShapeError):
        sf.linalg.lu_factor(sf.zeros(3))
    with pytest.raises(DTypeError):
        sf.linalg.lu_factor(sf.zeros(3, 3, dtype=sf.int64))
    with pytest.raises(ShapeError):
        sf.cholesky_solve(sf.zeros(3, 2), sf.eye(4))
    with pytest.raises(ShapeError):
        sf.matrix_exp(sf.zeros(2, 3))
    with pytest.raises(ShapeError):
        sf.lu_unpack(sf.zeros(3, 3), sf.zeros(2, dtype=sf.int32))
