"""sort / argsort / msort / topk / kthvalue vs PyTorch: values, indices, grads, meta, errors."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(0)


def M(x):
    """The library a tensor belongs to, so one lambda serves shapeflow and PyTorch."""
    return sf if isinstance(x, sf.Tensor) else torch


def normal(*shape):
    return rng.standard_normal(shape)


CASES = [
    ("sort", lambda t: M(t).sort(t), normal(5)),
    ("sort_dim0", lambda t: M(t).sort(t, 0), normal(4, 3)),
    ("sort_desc", lambda t: M(t).sort(t, -1, descending=True), normal(3, 6)),
    ("sort_method", lambda t: t.sort(dim=1, descending=True), normal(2, 3, 4)),
    ("sort_0d", lambda t: M(t).sort(t), normal()),
    ("sort_empty", lambda t: M(t).sort(t, 0), normal(0, 3)),
    ("argsort", lambda t: M(t).argsort(t, 1, descending=True), normal(3, 5)),
    ("msort", lambda t: M(t).msort(t), normal(4, 3)),
    ("topk", lambda t: M(t).topk(t, 2), normal(3, 5)),
    ("topk_smallest", lambda t: t.topk(3, dim=0, largest=False), normal(5, 2)),
    ("topk_all", lambda t: M(t).topk(t, 4, 1), normal(2, 4)),
    ("topk_zero", lambda t: M(t).topk(t, 0), normal(3, 4)),
    ("kthvalue", lambda t: M(t).kthvalue(t, 2), normal(3, 5)),
    ("kthvalue_keepdim", lambda t: t.kthvalue(1, 0, keepdim=True), normal(4, 3)),
    ("kthvalue_last", lambda t: M(t).kthvalue(t, 5, 1), normal(2, 5, 2)),
]


@pytest.mark.parametrize("name,fn,x", CASES, ids=[c[0] for c in CASES])
def test_sorting_matches_torch(name, fn, x):
    check_op(fn, fn, x.copy())


@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_keeps_the_order_of_ties_like_torch(descending):
    x = rng.integers(0, 3, size=(4, 17)).astype(np.float32)
    x[0, 3] = np.nan
    v, i = sf.sort(sf.tensor(x), dim=1, descending=descending, stable=True)
    tv, ti = torch.sort(torch.tensor(x), dim=1, descending=descending, stable=True)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.bool_])
def test_sort_other_dtypes(dtype):
    x = rng.integers(0, 2 if dtype is np.bool_ else 50, size=(3, 9)).astype(dtype)
    v, i = sf.sort(sf.tensor(x), descending=True, stable=True)
    tv, ti = torch.sort(torch.tensor(x), descending=True, stable=True)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    assert v.dtype is sf.tensor(x).dtype and i.dtype is sf.int64


def test_topk_grad_with_ties_goes_to_the_returned_indices():
    x = sf.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    v, i = x.topk(1)
    v.sum().backward()
    expect = np.zeros(4, np.float32)
    expect[i.item()] = 1
    np.testing.assert_array_equal(x.grad.numpy(), expect)


def test_grad_of_grad_through_sort():
    x = sf.tensor(normal(6), requires_grad=True)
    (g,) = sf.autograd.grad((sf.sort(x).values ** 3).sum(), [x], create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.detach().numpy(), rtol=1e-5)


def test_indices_are_not_the_saved_ones():
    x = sf.tensor(normal(5), requires_grad=True)
    v, i = sf.sort(x)
    i.zero_()  # changing the returned indices must not change the gradient
    v.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(5, np.float32))


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5), st.data())
@settings(max_examples=30, deadline=None)
def test_sort_and_topk_over_shapes_and_dims(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[dim]))
    desc = data.draw(st.booleans())
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)  # no ties
    check_op(lambda t: M(t).sort(t, dim, descending=desc), lambda t: t.sort(dim, desc),
             x, gradcheck=False)
    check_op(lambda t: M(t).topk(t, k, dim, largest=desc), lambda t: t.topk(k, dim, desc),
             x, gradcheck=False)
    if k:
        check_op(lambda t: M(t).kthvalue(t, k, dim), lambda t: t.kthvalue(k, dim), x,
                 gradcheck=False)


@pytest.mark.parametrize("call,match", [
    (lambda d: sf.topk(sf.zeros(2, 3, device=d), 4), "k \\(4\\) is out of range"),
    (lambda d: sf.topk(sf.zeros(3, device=d), -1), "out of range"),
    (lambda d: sf.kthvalue(sf.zeros(3, device=d), 0), "out of range"),
    (lambda d: sf.kthvalue(sf.zeros(3, device=d), 4), "out of range"),
    (lambda d: sf.sort(sf.zeros(3, device=d), dim=1), "dim 1 is out of range"),
])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_errors_name_the_op_and_operand(call, match, device):
    with pytest.raises(sf.ShapeError, match=match) as info:
        call(device)
    assert info.value.op in ("topk", "kthvalue", "sort")
    if "k (" in match:
        assert "[2, 3] float32" in str(info.value)


def test_symbolic_sizes_on_meta():
    B, V = sf.dims("B V")
    x = sf.empty(B, V, device="meta")
    assert sf.sort(x).values.shape == (B, V)
    assert tuple(sf.topk(x, 5).indices.shape) == (B, 5)
    assert tuple(sf.kthvalue(x, 1).values.shape) == (B,)
