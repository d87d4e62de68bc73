"""nonzero, masked_select/scatter, take, take_along_dim, searchsorted, bucketize, histc,
unique, unique_consecutive vs PyTorch: values, grads, meta shapes, errors."""

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
    return sf if isinstance(x, sf.Tensor) else torch


def normal(*shape):
    return rng.standard_normal(shape)


def mask(*shape):
    return rng.random(shape) > 0.5


def ints(low, high, *shape):
    return rng.integers(low, high, size=shape).astype(np.int64)


GRAD_CASES = [
    ("masked_select", lambda t, m: M(t).masked_select(t, m), normal(3, 4), mask(3, 4)),
    ("masked_select_bcast", lambda t, m: t.masked_select(m), normal(1, 4), mask(3, 4)),
    ("take", lambda t, i: M(t).take(t, i), normal(3, 4), ints(-12, 12, 2, 5)),
    ("take_repeats", lambda t, i: t.take(i), normal(5), np.array([0, 0, 4, -1])),
    ("take_along_dim", lambda t, i: M(t).take_along_dim(t, i, 1), normal(3, 4), ints(0, 4, 3, 6)),
    ("take_along_dim_bcast", lambda t, i: t.take_along_dim(i, 0), normal(4, 3), ints(0, 4, 2, 1)),
    ("take_along_dim_flat", lambda t, i: M(t).take_along_dim(t, i), normal(3, 4), ints(0, 12, 5)),
]


@pytest.mark.parametrize("name,fn,x,i", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_selection_values_and_grads(name, fn, x, i):
    check_op(fn, fn, x.copy(), i.copy(), meta=not name.startswith("masked_select"))


def test_masked_scatter_values_and_grads_and_inplace():
    x, m, s = normal(3, 4), mask(3, 4), normal(2, 7)
    fn = lambda t, mm, src: t.masked_scatter(mm, src)  # noqa: E731
    check_op(fn, fn, x, m, s)
    a, ta = sf.tensor(x), torch.tensor(x)
    a.masked_scatter_(sf.tensor(m), sf.tensor(s))
    ta.masked_scatter_(torch.tensor(m), torch.tensor(s))
    np.testing.assert_allclose(a.numpy(), ta.numpy())
    with pytest.raises(sf.ShapeError, match="masked_scatter: the mask has"):
        sf.zeros(4).masked_scatter(sf.ones(4, dtype=sf.bool), sf.ones(2))


def test_nonzero_and_argwhere():
    for x in (normal(3, 4) > 0, ints(0, 3, 5), np.array(2.0), np.array(0), ints(0, 2, 2, 0)):
        t, tt = sf.tensor(x), torch.tensor(x)
        np.testing.assert_array_equal(sf.nonzero(t).numpy(), torch.nonzero(tt).numpy())
        np.testing.assert_array_equal(t.argwhere().numpy(), torch.argwhere(tt).numpy())
        ours, theirs = t.nonzero(as_tuple=True), torch.nonzero(tt, as_tuple=True)
        assert len(ours) == len(theirs)
        for o, r in zip(ours, theirs):
            np.testing.assert_array_equal(o.numpy(), r.numpy())
    assert sf.nonzero(sf.tensor([1.0])).dtype is sf.int64


def test_data_dependent_sizes_raise_on_meta():
    x = sf.zeros(3, device="meta")
    for call in (lambda: sf.nonzero(x), lambda: sf.unique(x),
                 lambda: sf.masked_select(x, sf.zeros(3, dtype=sf.bool, device="meta"))):
        with pytest.raises(sf.DeviceError, match="depends on the values"):
            call()


def test_ops_with_known_shapes_run_on_meta():
    x = sf.zeros(3, 4, device="meta", requires_grad=True)
    assert tuple(sf.take(x, sf.zeros(2, 2, dtype=sf.long, device="meta")).shape) == (2, 2)
    m = sf.zeros(3, 4, dtype=sf.bool, device="meta")
    out = x.masked_scatter(m, sf.zeros(12, device="meta"))
    assert tuple(out.shape) == (3, 4)
    out.sum().backward()
    assert x.grad.device == "meta"
    assert tuple(sf.searchsorted(sf.zeros(5, device="meta"),
                                 sf.zeros(2, 3, device="meta")).shape) == (2, 3)
    assert tuple(sf.histc(x, 7).shape) == (7,)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_and_bucketize(right):
    seq = np.sort(ints(0, 10, 12)).astype(np.float64)
    vals = ints(-1, 11, 3, 4).astype(np.float64)
    got = sf.searchsorted(sf.tensor(seq), sf.tensor(vals), right=right)
    want = torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype is sf.int64
    got = sf.bucketize(sf.tensor(vals), sf.tensor(seq), right=right, out_int32=True)
    want = torch.bucketize(torch.tensor(vals), torch.tensor(seq), right=right, out_int32=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.dtype is sf.int32
    seq2 = np.sort(normal(3, 5), -1)
    vals2 = normal(3, 2)
    side = "right" if right else "left"
    got = sf.searchsorted(sf.tensor(seq2), sf.tensor(vals2), side=side)
    want = torch.searchsorted(torch.tensor(seq2), torch.tensor(vals2), side=side)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    unsorted = normal(6)
    sorter = np.argsort(unsorted)
    got = sf.searchsorted(sf.tensor(unsorted), sf.tensor(vals2[0]), sorter=sf.tensor(sorter))
    want = torch.searchsorted(torch.tensor(unsorted), torch.tensor(vals2[0]),
                              sorter=torch.tensor(sorter))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert sf.searchsorted(sf.tensor([1.0, 2.0]), 1.5).item() == 1


@pytest.mark.parametrize("call,err,match", [
    (lambda: sf.searchsorted(sf.zeros(2, 3), sf.zeros(3, 1)), sf.ShapeError, "first N-1"),
    (lambda: sf.searchsorted(sf.zeros(3), sf.zeros(2), right=True, side="left"),
     sf.ShapeError, "opposites"),
    (lambda: sf.bucketize(sf.zeros(2), sf.zeros(2, 2)), sf.ShapeError, "1 dimension"),
    (lambda: sf.take(sf.zeros(3), sf.tensor([3])), sf.ShapeError, "index 3 out of range"),
    (lambda: sf.take(sf.zeros(3), sf.tensor([0.0])), sf.DTypeError, "long"),
    (lambda: sf.take_along_dim(sf.zeros(3), sf.zeros(1, 1, dtype=sf.long), 0), sf.ShapeError,
     "same number of dimensions"),
    (lambda: sf.masked_select(sf.zeros(3), sf.zeros(3)), sf.DTypeError, "bool mask"),
    (lambda: sf.histc(sf.zeros(3, dtype=sf.long)), sf.DTypeError, "floating"),
    (lambda: sf.histc(sf.zeros(3), 4, 1.0, 0.0), sf.ShapeError, "max must be larger"),
])
def test_errors_name_op_and_operands(call, err, match):
    with pytest.raises(err, match=match) as info:
        call()
    assert info.value.op


def test_histc_matches_torch():
    x = normal(200)
    for bins, lo, hi in ((10, 0, 0), (7, -1, 1), (5, 3, 3)):
        got = sf.histc(sf.tensor(x), bins, lo, hi)
        want = torch.histc(torch.tensor(x), bins, lo, hi)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    same = sf.histc(sf.full((4,), 2.0), 4)
    np.testing.assert_array_equal(same.numpy(), torch.histc(torch.full((4,), 2.0), 4).numpy())


@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5),
                  elements=st.integers(0, 3)), st.booleans(), st.booleans(), st.data())
@settings(max_examples=40, deadline=None)
def test_unique_and_unique_consecutive_match_torch(x, inverse, counts, data):
    dim = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    for name in ("unique", "unique_consecutive"):
        if dim is not None and x.shape[dim] == 0 or (dim is not None and x.size == 0):
            continue
        kw = dict(return_inverse=inverse, return_counts=counts, dim=dim)
        ours = getattr(sf, name)(sf.tensor(x), **kw)
        theirs = getattr(torch, name)(torch.tensor(x), **kw)
        ours = ours if isinstance(ours, tuple) else (ours,)
        theirs = theirs if isinstance(theirs, tuple) else (theirs,)
        assert len(ours) == len(theirs)
        for o, r in zip(ours, theirs):
            assert tuple(o.shape) == tuple(r.shape), (name, o.shape, r.shape)
            np.testing.assert_array_equal(o.numpy(), r.numpy())


def test_unique_method_and_float():
    x = sf.tensor([3.0, 1.0, 3.0, 2.0])
    v, inv = x.unique(return_inverse=True)
    np.testing.assert_array_equal(v.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(inv.numpy(), [2, 0, 2, 1])
    assert v.dtype is sf.float32


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), st.data())
@settings(max_examples=25, deadline=None)
def test_take_along_dim_over_shapes(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    ishape = list(shape)
    ishape[dim] = data.draw(st.integers(0, 5))
    index = rng.integers(0, shape[dim], size=ishape).astype(np.int64)
    fn = lambda t, i: M(t).take_along_dim(t, i, dim)  # noqa: E731
    check_op(fn, fn, normal(*shape), index, gradcheck=False)
