"""The pairs the OpInfo census found failing (issue 35), each against PyTorch: conversions
with memory_format, H/mH/mT, sf.zero_, fmax/fmin on bools, integer addbmm/addmv/baddbmm,
bool addr, integer hardtanh/relu6, layout=, tensordot's size-1 broadcast, lerp's float64
weight, ties in sort/topk/kthvalue, and small missing names."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn.functional as F

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("name,dtype", [("float", "float32"), ("double", "float64"),
                                        ("half", "float16"), ("bfloat16", "bfloat16"),
                                        ("long", "int64"), ("int", "int32"), ("short", "int16"),
                                        ("char", "int8"), ("byte", "uint8"), ("bool", "bool")])
def test_conversions_take_memory_format(name, dtype):
    x = sf.tensor([[1.5, -2.0], [0.0, 3.0]])
    t = torch.tensor([[1.5, -2.0], [0.0, 3.0]])
    out = getattr(x, name)(memory_format=sf.preserve_format)
    ref = getattr(t, name)(memory_format=torch.preserve_format)
    assert out.dtype is getattr(sf, dtype if dtype != "bool" else "bool")
    np.testing.assert_array_equal(out.float().numpy(), ref.float().numpy())
    assert getattr(x, name)().dtype is out.dtype


def test_contiguous_and_clone_take_memory_format():
    x = sf.tensor(RNG.standard_normal((2, 3, 4, 5)))
    assert x.contiguous(memory_format=sf.contiguous_format) is x
    y = x.clone(memory_format=sf.channels_last)
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    assert sf.clone(x, memory_format=sf.preserve_format)._data is not x._data
    with pytest.raises(sf.ShapeError, match="rank 4"):
        sf.zeros(3, 4).clone(memory_format=sf.channels_last)
    with pytest.raises(sf.DTypeError, match="memory format"):
        x.contiguous(memory_format="channels_last")


def test_matrix_transposes():
    a = RNG.standard_normal((2, 3, 4))
    x, t = sf.tensor(a), torch.tensor(a)
    np.testing.assert_array_equal(x.mT.numpy(), t.mT.numpy())
    np.testing.assert_array_equal(x.mH.numpy(), t.mH.numpy())
    np.testing.assert_array_equal(x[0].H.numpy(), t[0].H.numpy())
    assert tuple(sf.tensor(2.0).H.shape) == ()
    for bad in (lambda: x.H, lambda: sf.zeros(3).mT, lambda: sf.zeros(3).mH):
        with pytest.raises(sf.ShapeError, match="only supported on matrices"):
            bad()
    w = sf.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    (w.mH * sf.tensor(np.arange(12.0).reshape(4, 3))).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.arange(12.0).reshape(4, 3).T)


def test_zero_function():
    x = sf.ones(2, 3)
    assert sf.zero_(x) is x and not x.numpy().any()


@pytest.mark.parametrize("fn", ["fmax", "fmin"])
def test_fmax_fmin_on_bools(fn):
    a, b = [True, False, True, False], [True, True, False, False]
    out = getattr(sf, fn)(sf.tensor(a), sf.tensor(b))
    ref = getattr(torch, fn)(torch.tensor(a), torch.tensor(b))
    assert out.dtype is sf.bool and out.tolist() == ref.tolist()


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.6, 0.2), (1.6, 2.5), (2, 3), (0, 1)])
def test_integer_batched_products_keep_int64(beta, alpha):
    i, b1, b2 = (RNG.integers(-5, 5, s) for s in ((3, 4), (2, 3, 5), (2, 5, 4)))
    out = sf.addbmm(sf.tensor(i), sf.tensor(b1), sf.tensor(b2), beta=beta, alpha=alpha)
    ref = torch.addbmm(torch.tensor(i), torch.tensor(b1), torch.tensor(b2), beta=beta,
                       alpha=alpha)
    assert out.dtype is sf.int64 and out.tolist() == ref.tolist()
    out = sf.baddbmm(sf.tensor(i[None]), sf.tensor(b1), sf.tensor(b2), beta=beta, alpha=alpha)
    ref = torch.baddbmm(torch.tensor(i[None]), torch.tensor(b1), torch.tensor(b2), beta=beta,
                        alpha=alpha)
    assert out.dtype is sf.int64 and out.tolist() == ref.tolist()
    v = RNG.integers(-5, 5, 4)
    out = sf.addmv(sf.tensor(i[:, 0]), sf.tensor(i), sf.tensor(v), beta=beta, alpha=alpha)
    ref = torch.addmv(torch.tensor(i[:, 0]), torch.tensor(i), torch.tensor(v), beta=beta,
                      alpha=alpha)
    assert out.dtype is sf.int64 and out.tolist() == ref.tolist()


@pytest.mark.parametrize("beta,alpha", [(1, 1), (3, 2), (0, 1), (1, 0), (True, False)])
def test_addr_on_bools(beta, alpha):
    i, a, b = RNG.random((3, 4)) > 0.5, RNG.random(3) > 0.5, RNG.random(4) > 0.5
    out = sf.addr(sf.tensor(i), sf.tensor(a), sf.tensor(b), beta=beta, alpha=alpha)
    ref = torch.addr(torch.tensor(i), torch.tensor(a), torch.tensor(b), beta=beta, alpha=alpha)
    assert out.dtype is sf.bool and out.tolist() == ref.tolist()


def test_addr_refuses_float_scalars_on_integers():
    with pytest.raises(sf.ShapeflowError, match="must not be a floating point"):
        sf.addr(sf.tensor([[3]]), sf.tensor([2]), sf.tensor([4]), beta=0.6)


def test_hardtanh_and_relu6_on_integers():
    x = RNG.integers(-9, 9, 20)
    out = F.hardtanh(sf.tensor(x), -1.5, 2.7)
    assert out.dtype is sf.int64
    assert out.tolist() == torch.nn.functional.hardtanh(torch.tensor(x), -1.5, 2.7).tolist()
    assert F.relu6(sf.tensor(x)).tolist() == torch.nn.functional.relu6(torch.tensor(x)).tolist()
    with pytest.raises(sf.DTypeError, match="bool"):
        F.hardtanh(sf.tensor([True]))


def test_layout_keyword():
    assert isinstance(sf.strided, sf.layout) and repr(sf.strided) == "shapeflow.strided"
    for make in (lambda **k: sf.zeros(2, 3, **k), lambda **k: sf.full((2,), 1.0, **k),
                 lambda **k: sf.arange(3, **k), lambda **k: sf.normal(0.0, 1.0, (2,), **k),
                 lambda **k: sf.randn(2, **k), lambda **k: sf.ones_like(sf.zeros(2), **k)):
        assert tuple(make(layout=sf.strided).shape) == tuple(make().shape)
        assert tuple(make(layout=None).shape) == tuple(make().shape)
        with pytest.raises(sf.ShapeflowError, match="layout"):
            make(layout="sparse_coo")


def test_tensordot_broadcasts_a_size_one_contracted_dim():
    a, b = RNG.standard_normal((1, 1, 1)), RNG.standard_normal((2, 1, 2))
    dims = ([0, 1], [2, 0])
    x, y = sf.tensor(a, requires_grad=True), sf.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, ref = sf.tensordot(x, y, dims), torch.tensordot(tx, ty, dims)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy())
    with pytest.raises(sf.ShapeError, match="contracted dims differ"):
        sf.tensordot(sf.zeros(3, 2), sf.zeros(3, 3), ([1], [0]))


def test_lerp_keeps_a_float64_weight_exact():
    s, e = RNG.standard_normal((5, 5)), RNG.standard_normal((5, 5))
    out = sf.lerp(sf.tensor(s), sf.tensor(e), 0.4)
    ref = torch.lerp(torch.tensor(s), torch.tensor(e), 0.4)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=1e-15)


def _selects_same_values(x: np.ndarray, ours: np.ndarray, theirs: np.ndarray, dim: int):
    """Both index tensors pick equal values of x along dim: a valid order of ties (PyTorch
    leaves the order of equal values unspecified; shapeflow keeps them in input order)."""
    pick = lambda idx: np.take_along_axis(x, idx, axis=dim)  # noqa: E731
    np.testing.assert_array_equal(pick(ours), pick(theirs))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_bool_sort(descending, dim):
    b = RNG.random((40, 30, 3)) > 0.5
    out = sf.sort(sf.tensor(b), dim=dim, descending=descending)
    ref = torch.sort(torch.tensor(b), dim=dim, descending=descending)
    np.testing.assert_array_equal(out.values.numpy(), ref.values.numpy())
    _selects_same_values(b, out.indices.numpy(), ref.indices.numpy(), dim)
    stable = sf.argsort(sf.tensor(b), dim=dim, descending=descending, stable=True)
    np.testing.assert_array_equal(stable.numpy(), torch.argsort(
        torch.tensor(b), dim=dim, descending=descending, stable=True).numpy())


@pytest.mark.parametrize("k", [1, 2, 5, 30])
def test_topk_and_kthvalue_with_ties(k):
    x = RNG.integers(-3, 3, (6, 30))
    f = x.astype(np.float64)
    f[RNG.random(f.shape) < 0.1] = np.nan
    for a in (x, f):
        for largest in (True, False):
            out = sf.topk(sf.tensor(a), k, largest=largest)
            ref = torch.topk(torch.tensor(a), k, largest=largest)
            np.testing.assert_array_equal(out.values.numpy(), ref.values.numpy())
            _selects_same_values(a, out.indices.numpy(), ref.indices.numpy(), -1)
        for dim in (0, 1):
            if k <= a.shape[dim]:
                out = sf.kthvalue(sf.tensor(a), k, dim=dim, keepdim=True)
                ref = torch.kthvalue(torch.tensor(a), k, dim=dim, keepdim=True)
                np.testing.assert_array_equal(out.values.numpy(), ref.values.numpy())
                _selects_same_values(a, out.indices.numpy(), ref.indices.numpy(), dim)


def test_nonzero_static():
    for a, size in (([0, 1, 2, 0, 3], 2), ([0, 1, 2, 0, 3], 5), ([[0, 1], [1, 1]], 4),
                    (3.0, 2), (0.0, 1)):
        out = sf.nonzero_static(sf.tensor(a), size=size, fill_value=-7)
        ref = torch.nonzero_static(torch.tensor(a), size=size, fill_value=-7)
        assert out.dtype is sf.int64 and tuple(out.shape) == tuple(ref.shape)
        assert out.tolist() == ref.tolist()
    meta = sf.nonzero_static(sf.zeros(3, 4, device="meta"), size=6)
    assert tuple(meta.shape) == (6, 2) and meta.device == "meta"
    with pytest.raises(sf.ShapeError, match="non-negative"):
        sf.nonzero_static(sf.zeros(2), size=-1)


def test_strided_and_permuted_empties():
    assert tuple(sf.empty_strided((2, 3), (1, 2), dtype=sf.float64).shape) == (2, 3)
    assert sf.empty_permuted((2, 3, 4), (0, 2, 1)).dtype is sf.float32
    x = sf.zeros(2, dtype=sf.int64)
    y = x.new_empty_strided((3, 2), (2, 1))
    assert tuple(y.shape) == (3, 2) and y.dtype is sf.int64
    with pytest.raises(sf.ShapeError, match="strides and shape"):
        sf.empty_strided((2, 3), (1,))
    with pytest.raises(sf.ShapeError, match="physical_layout"):
        sf.empty_permuted((2, 3, 4), (0, 2))


def test_rdiv():
    x = sf.tensor([1.0, 2.0, 4.0])
    assert x.__rdiv__(2).tolist() == torch.tensor([1.0, 2.0, 4.0]).__rdiv__(2).tolist()


@pytest.mark.parametrize("dtype", ["float32", "float64", "bool"])  # PyTorch has no int64 one
@pytest.mark.parametrize("batch", [0, 2])
def test_unfold_zero_batch_and_integer_input(dtype, batch):
    a = (RNG.random((batch, 3, 5, 4)) * 5).astype(dtype)
    out = F.unfold(sf.tensor(a), (2, 3), padding=1)
    ref = torch.nn.functional.unfold(torch.tensor(a), (2, 3), padding=1)
    assert out.dtype == getattr(sf, dtype) and tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
