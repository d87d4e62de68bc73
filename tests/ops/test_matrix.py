"""shapeflow.linalg and the matrix products vs PyTorch: values, gradients, float64
gradcheck, meta shapes, batches, and LinAlgError / ShapeError where PyTorch raises."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(4)


def normal(*shape):
    return np.asarray(rng.standard_normal(shape))


def well_conditioned(*shape):
    x = normal(*shape)
    return x + 3 * np.eye(shape[-1]) if len(shape) > 1 and shape[-1] == shape[-2] else x


PRODUCTS = [
    ("addmm", lambda i, a, b: sf.addmm(i, a, b), lambda i, a, b: torch.addmm(i, a, b),
     [(2, 4), (2, 3), (3, 4)]),
    ("addmm_scaled", lambda i, a, b: i.addmm(a, b, beta=0.5, alpha=2),
     lambda i, a, b: i.addmm(a, b, beta=0.5, alpha=2), [(4,), (2, 3), (3, 4)]),
    ("addmv", lambda i, a, b: sf.addmv(i, a, b, alpha=3), lambda i, a, b: torch.addmv(
        i, a, b, alpha=3), [(2,), (2, 3), (3,)]),
    ("addr", lambda i, a, b: sf.addr(i, a, b), lambda i, a, b: torch.addr(i, a, b),
     [(2, 3), (2,), (3,)]),
    ("baddbmm", lambda i, a, b: sf.baddbmm(i, a, b, beta=2), lambda i, a, b: torch.baddbmm(
        i, a, b, beta=2), [(1, 2, 4), (3, 2, 3), (3, 3, 4)]),
    ("addbmm", lambda i, a, b: sf.addbmm(i, a, b), lambda i, a, b: torch.addbmm(i, a, b),
     [(2, 4), (3, 2, 3), (3, 3, 4)]),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,shapes", PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_products(name, sf_fn, t_fn, shapes):
    check_op(sf_fn, t_fn, *[normal(*s) for s in shapes])


def test_addmm_beta_zero_ignores_nan():
    i = sf.tensor([[float("nan"), 1.0]])
    out = sf.addmm(i, sf.ones(1, 2), sf.ones(2, 2), beta=0)
    assert out.tolist() == [[2.0, 2.0]]


def test_vdot_cross_kron_tensordot_cdist():
    check_op(sf.vdot, torch.vdot, normal(4), normal(4))
    check_op(lambda a, b: sf.cross(a, b, dim=1), lambda a, b: torch.cross(a, b, dim=1),
             normal(2, 3), normal(2, 3))
    check_op(lambda a, b: sf.cross(a, b, dim=0), lambda a, b: torch.cross(a, b, dim=0),
             normal(3, 2), normal(3, 1))
    check_op(sf.linalg.cross, torch.linalg.cross, normal(4, 3), normal(1, 3))
    check_op(sf.kron, torch.kron, normal(2, 3), normal(3, 2))
    check_op(sf.kron, torch.kron, normal(2), normal(2, 2, 3))
    check_op(lambda a, b: a.kron(b), lambda a, b: a.kron(b), normal(2, 1), normal(3))
    check_op(sf.tensordot, torch.tensordot, normal(2, 3, 4), normal(3, 4, 5))
    check_op(lambda a, b: sf.tensordot(a, b, ([0, 2], [2, 0])),
             lambda a, b: torch.tensordot(a, b, ([0, 2], [2, 0])), normal(2, 3, 4),
             normal(4, 5, 2))
    check_op(lambda a, b: sf.tensordot(a, b, 0), lambda a, b: torch.tensordot(a, b, 0),
             normal(2), normal(3))
    for p in (2.0, 1.0, 3.0, math.inf):
        check_op(lambda a, b, p=p: sf.cdist(a, b, p), lambda a, b, p=p: torch.cdist(a, b, p),
                 normal(4, 3), normal(5, 3), rtol=1e-4, atol=1e-5)
    check_op(sf.cdist, torch.cdist, normal(2, 4, 3), normal(2, 5, 3), rtol=1e-4, atol=1e-5)
    with pytest.raises(sf.ShapeError, match="size 3"):
        sf.cross(sf.zeros(2, 4), sf.zeros(2, 4), dim=1)
    with pytest.raises(sf.ShapeError, match="contracted"):
        sf.tensordot(sf.zeros(2, 3), sf.zeros(4, 3), ([1], [0]))


def sym_pd(x):
    return x @ x.mT + 3 * (sf.eye(x.shape[-1], dtype=x.dtype, device=x.device)
                           if isinstance(x, sf.Tensor) else torch.eye(x.shape[-1], dtype=x.dtype))


LINALG = [
    ("inv", sf.linalg.inv, torch.linalg.inv, [(3, 3)], well_conditioned),
    ("inv_batch", sf.linalg.inv, torch.linalg.inv, [(2, 4, 4)], well_conditioned),
    ("inverse_method", lambda a: a.inverse(), lambda a: a.inverse(), [(3, 3)], well_conditioned),
    ("det", sf.linalg.det, torch.linalg.det, [(3, 3)], normal),
    ("det_batch", lambda a: a.det(), lambda a: a.det(), [(2, 3, 3)], normal),
    ("slogdet", sf.linalg.slogdet, torch.linalg.slogdet, [(2, 3, 3)], normal),
    ("logdet", sf.logdet, torch.logdet, [(3, 3)], well_conditioned),
    ("solve", sf.linalg.solve, torch.linalg.solve, [(3, 3), (3, 2)], well_conditioned),
    ("solve_vec", sf.linalg.solve, torch.linalg.solve, [(3, 3), (3,)], well_conditioned),
    ("solve_batch_bcast", sf.linalg.solve, torch.linalg.solve, [(2, 3, 3), (3, 4)],
     well_conditioned),
    ("solve_right", lambda a, b: sf.linalg.solve(a, b, left=False),
     lambda a, b: torch.linalg.solve(a, b, left=False), [(3, 3), (2, 3)], well_conditioned),
    ("cholesky", lambda x: sf.linalg.cholesky(sym_pd(x)),
     lambda x: torch.linalg.cholesky(sym_pd(x)), [(3, 3)], normal),
    ("cholesky_upper", lambda x: sf.linalg.cholesky(sym_pd(x), upper=True),
     lambda x: torch.linalg.cholesky(sym_pd(x), upper=True), [(2, 3, 3)], normal),
    ("qr", sf.linalg.qr, torch.linalg.qr, [(4, 3)], normal),
    ("qr_square_batch", sf.linalg.qr, torch.linalg.qr, [(2, 3, 3)], normal),
    ("qr_only_r", lambda a: sf.linalg.qr(a).R, lambda a: torch.linalg.qr(a).R, [(5, 3)],
     normal),
    # singular and eigen vectors are unique up to sign (NumPy's and PyTorch's LAPACK calls
    # may pick differently): compare sign-invariant functions that still use every output
    ("svd_joint", lambda a: _svd_invariant(sf, a), lambda a: _svd_invariant(torch, a),
     [(4, 3)], normal),
    ("svd_wide", lambda a: _svd_invariant(sf, a), lambda a: _svd_invariant(torch, a),
     [(2, 3, 5)], normal),
    ("svd_u_only", lambda a: sf.linalg.svd(a, full_matrices=False).U ** 2,
     lambda a: torch.linalg.svd(a, full_matrices=False).U ** 2, [(4, 3)], normal),
    ("svd_vh_only", lambda a: sf.linalg.svd(a, full_matrices=False).Vh ** 2,
     lambda a: torch.linalg.svd(a, full_matrices=False).Vh ** 2, [(3, 5)], normal),
    ("svd_only_s", lambda a: sf.linalg.svd(a, full_matrices=False).S,
     lambda a: torch.linalg.svd(a, full_matrices=False).S, [(4, 3)], normal),
    ("svdvals", sf.linalg.svdvals, torch.linalg.svdvals, [(3, 5)], normal),
    ("eigh", lambda x: _eigh_invariant(sf, x), lambda x: _eigh_invariant(torch, x),
     [(3, 3)], normal),
    ("eigh_batch", lambda x: _eigh_invariant(sf, x), lambda x: _eigh_invariant(torch, x),
     [(2, 4, 4)], normal),
    ("eigvalsh", lambda x: sf.linalg.eigvalsh(x + x.mT),
     lambda x: torch.linalg.eigvalsh(x + x.mT), [(2, 4, 4)], normal),
    ("pinv", sf.linalg.pinv, torch.linalg.pinv, [(4, 3)], normal),
    ("pinv_wide", sf.linalg.pinv, torch.linalg.pinv, [(3, 5)], normal),
]


def _svd_invariant(lib, a):
    u, s, vh = lib.linalg.svd(a, full_matrices=False)
    w = lib.arange(1, s.shape[-1] + 1, dtype=a.dtype, device=a.device) * 0.7
    return (u * w.unsqueeze(-2)) @ vh, s, u ** 2


def _eigh_invariant(lib, x):
    w, v = lib.linalg.eigh(x + x.mT)
    c = lib.arange(1, w.shape[-1] + 1, dtype=x.dtype, device=x.device) * 0.3
    return w, (v * c.unsqueeze(-2)) @ v.mT, v ** 2


@pytest.mark.parametrize("name,sf_fn,t_fn,shapes,make", LINALG, ids=[c[0] for c in LINALG])
def test_linalg(name, sf_fn, t_fn, shapes, make):
    # vectors are unique up to sign; NumPy's and PyTorch's LAPACK agree on these inputs,
    # and gradients of sign-invariant losses would hide errors, so compare directly
    check_op(sf_fn, t_fn, *[make(*s) for s in shapes], rtol=1e-4, atol=1e-4)


def test_det_gradient_at_singular_matrices():
    # d det / dA is the cofactor matrix, nonzero at a rank n-1 matrix (PyTorch 2.13 gives 0
    # here); compare with central differences
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])  # rank 2
    s = sf.tensor(a, requires_grad=True)
    sf.linalg.det(s).backward()
    fd = np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            e = np.zeros((3, 3))
            e[i, j] = 1e-6
            fd[i, j] = (np.linalg.det(a + e) - np.linalg.det(a - e)) / 2e-6
    np.testing.assert_allclose(s.grad.numpy(), fd, atol=1e-6)
    assert np.abs(fd).max() > 1
    z = sf.zeros(3, 3, dtype=sf.float64, requires_grad=True)
    sf.linalg.det(z).backward()
    assert z.grad.tolist() == [[0.0] * 3] * 3


def test_vector_and_matrix_norms():
    x = normal(3, 4)
    for ord_ in (2, 1, 3.5, math.inf, -math.inf, 0, -1):
        check_op(lambda a, o=ord_: sf.linalg.vector_norm(a, o),
                 lambda a, o=ord_: torch.linalg.vector_norm(a, o), x, gradcheck=ord_ != 0,
                 rtol=1e-4)
    check_op(lambda a: sf.linalg.vector_norm(a, 2, dim=1, keepdim=True),
             lambda a: torch.linalg.vector_norm(a, 2, dim=1, keepdim=True), x)
    for ord_ in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        check_op(lambda a, o=ord_: sf.linalg.matrix_norm(a, o),
                 lambda a, o=ord_: torch.linalg.matrix_norm(a, o), normal(2, 3, 4), rtol=1e-4)
        check_op(lambda a, o=ord_: sf.linalg.matrix_norm(a, o, (0, 2), keepdim=True),
                 lambda a, o=ord_: torch.linalg.matrix_norm(a, o, (0, 2), keepdim=True),
                 normal(3, 2, 4), rtol=1e-4)
    for kw in ({}, {"ord": "fro"}, {"ord": 1}, {"dim": 1}, {"dim": (0, 1)}, {"ord": 2, "dim": 0}):
        check_op(lambda a, k=kw: sf.linalg.norm(a, **k), lambda a, k=kw: torch.linalg.norm(a, **k),
                 x, rtol=1e-4)
    check_op(sf.linalg.norm, torch.linalg.norm, normal(2, 3, 4))


def test_matrix_rank():
    a = normal(5, 3) @ normal(3, 4)
    assert sf.linalg.matrix_rank(sf.tensor(a)).item() == 3
    assert sf.linalg.matrix_rank(sf.tensor(a), atol=1e9).item() == 0
    b = np.stack([a, np.eye(5, 4)])
    assert sf.linalg.matrix_rank(sf.tensor(b)).tolist() == \
        torch.linalg.matrix_rank(torch.tensor(b)).tolist()


def test_torch_level_names():
    a = normal(4, 3)
    u, s, v = sf.svd(sf.tensor(a))
    tu, ts, tv = torch.svd(torch.tensor(a))
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(tv.numpy()), atol=1e-10)
    np.testing.assert_allclose(s.numpy(), ts.numpy())
    q, r = sf.tensor(a).qr()
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-12)
    q, r = sf.qr(sf.tensor(a), some=False)
    assert tuple(q.shape) == (4, 4) and tuple(r.shape) == (4, 3)
    spd = a.T @ a + np.eye(3)
    np.testing.assert_allclose(sf.cholesky(sf.tensor(spd)).numpy(),
                               torch.cholesky(torch.tensor(spd)).numpy())
    np.testing.assert_allclose(sf.tensor(a).pinverse().numpy(),
                               torch.tensor(a).pinverse().numpy(), atol=1e-10)
    np.testing.assert_allclose(sf.linalg.diagonal(sf.tensor(normal(2, 3, 3))).shape, (2, 3))
    assert sf.linalg.matmul is sf.matmul


def test_errors():
    sing = sf.tensor([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(sf.linalg.LinAlgError, match="singular") as e:
        sf.linalg.inv(sing)
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, sf.ShapeflowError)
    with pytest.raises(sf.linalg.LinAlgError, match="singular"):
        sf.linalg.solve(sing, sf.ones(2))
    with pytest.raises(sf.linalg.LinAlgError, match="positive-definite"):
        sf.linalg.cholesky(sf.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(sf.ShapeError, match="square"):
        sf.linalg.inv(sf.zeros(2, 3))
    with pytest.raises(sf.ShapeError, match="square"):
        sf.linalg.det(sf.zeros(2, 3, device="meta"))
    with pytest.raises(sf.ShapeError):
        sf.linalg.solve(sf.eye(3), sf.ones(2, 1))
    with pytest.raises(sf.DTypeError, match="float32 or float64"):
        sf.linalg.inv(sf.eye(2, dtype=sf.int64))
    with pytest.raises(sf.DTypeError, match="same dtype"):
        sf.linalg.solve(sf.eye(2), sf.ones(2, dtype=sf.float64))
    x = sf.tensor(normal(2, 4), requires_grad=True)
    with pytest.raises(sf.GraphError, match="mode='reduced'"):
        sf.linalg.qr(x, mode="r").R.sum().backward()  # no Q to differentiate with


def test_meta_shapes_without_data():
    m = sf.zeros(5, 4, 3, device="meta")
    q, r = sf.linalg.qr(m)
    assert tuple(q.shape) == (5, 4, 3) and tuple(r.shape) == (5, 3, 3)
    u, s, vh = sf.linalg.svd(m)
    assert (tuple(u.shape), tuple(s.shape), tuple(vh.shape)) == ((5, 4, 4), (5, 3), (5, 3, 3))
    sq = sf.zeros(2, 3, 3, device="meta", requires_grad=True)
    out = sf.linalg.inv(sq).sum() + sf.linalg.det(sq).sum() + sf.linalg.eigh(sq)[1].sum()
    out.backward()
    assert tuple(sq.grad.shape) == (2, 3, 3) and sq.grad.device == "meta"
    assert tuple(sf.linalg.solve(sq, sf.zeros(3, device="meta")).shape) == (2, 3)
    assert tuple(sf.linalg.matrix_norm(sq, "fro").shape) == (2,)
    assert tuple(sf.addmm(sf.zeros(4, device="meta"), sf.zeros(2, 3, device="meta"),
                          sf.zeros(3, 4, device="meta")).shape) == (2, 4)


def test_grad_of_grad_inv_and_solve():
    a = well_conditioned(3, 3)
    s = sf.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    b = sf.ones(3, dtype=sf.float64)
    (gs,) = sf.autograd.grad(sf.linalg.inv(s).sum() + sf.linalg.solve(s, b).sum(), s,
                             create_graph=True)
    (gt,) = torch.autograd.grad(torch.linalg.inv(t).sum() + torch.linalg.solve(
        t, torch.ones(3, dtype=torch.float64)).sum(), t, create_graph=True)
    (gs ** 2).sum().backward()
    (gt ** 2).sum().backward()
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-10)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 3), max_size=2), st.integers(1, 4), st.integers(1, 4))
def test_svd_qr_reconstruct_any_batch(batch, m, n):
    a = normal(*batch, m, n)
    u, s, vh = sf.linalg.svd(sf.tensor(a), full_matrices=False)
    np.testing.assert_allclose(((u * s.unsqueeze(-2)) @ vh).numpy(), a, atol=1e-10)
    np.testing.assert_allclose(s.numpy(), torch.linalg.svdvals(torch.tensor(a)).numpy(),
                               atol=1e-10)
    q, r = sf.linalg.qr(sf.tensor(a))
    np.testing.assert_allclose((q @ r).numpy(), a, atol=1e-10)


def test_multi_dot_matrix_power_vecdot():
    a, b, c = normal(2, 3), normal(3, 4), normal(4)
    check_op(lambda x, y, z: sf.linalg.multi_dot([x, y, z]),
             lambda x, y, z: torch.linalg.multi_dot([x, y, z]), a, b, c)
    m = well_conditioned(2, 3, 3) / 3
    for n in (0, 1, 2, 5, -1, -3):
        check_op(lambda x, n=n: sf.linalg.matrix_power(x, n),
                 lambda x, n=n: torch.linalg.matrix_power(x, n), m, rtol=1e-4, atol=1e-5,
                 grad=n != 0)
    check_op(sf.linalg.vecdot, torch.linalg.vecdot, normal(2, 3), normal(3))


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_solve_triangular(upper, left, unit):
    a = well_conditioned(2, 3, 3)
    b = normal(2, 3, 4) if left else normal(2, 4, 3)
    check_op(lambda x, y: sf.linalg.solve_triangular(x, y, upper=upper, left=left,
                                                     unitriangular=unit),
             lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left,
                                                        unitriangular=unit),
             a, b, rtol=1e-4, atol=1e-5)
