"""Movement ops vs PyTorch: values, grads, float64 gradcheck, saved bytes, meta shapes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(0)


def M(x):
    """The library a tensor belongs to, so one lambda serves shapeflow and PyTorch."""
    return sf if isinstance(x, sf.Tensor) else torch


def pad_fn(x, *args, **kwargs):
    return sf.pad(x, *args, **kwargs) if isinstance(x, sf.Tensor) else TF.pad(x, *args,
                                                                                **kwargs)


def normal(*shape):
    return rng.standard_normal(shape)


def ints(high, *shape):
    return rng.integers(0, high, size=shape).astype(np.int64)


def perm_rows(n, k, cols):
    """An index of shape (k, cols) whose columns hold distinct values below n (for scatter)."""
    return np.stack([rng.permutation(n)[:k] for _ in range(cols)], axis=1).astype(np.int64)


def mask(*shape):
    return np.asarray(rng.standard_normal(shape) > 0)


CASES = [
    # flatten / unflatten / movedim / swapaxes
    ("flatten_all", lambda x: x.flatten(), [normal(2, 3, 4)]),
    ("flatten_mid", lambda x: x.flatten(1, 2), [normal(2, 3, 4)]),
    ("flatten_neg", lambda x: M(x).flatten(x, -2, -1), [normal(2, 3, 4)]),
    ("flatten_0d", lambda x: x.flatten(), [normal()]),
    ("flatten_empty", lambda x: x.flatten(0, 1), [normal(0, 3, 2)]),
    ("flatten_same", lambda x: x.flatten(1, 1), [normal(2, 3)]),
    ("unflatten", lambda x: x.unflatten(1, (2, 3)), [normal(4, 6)]),
    ("unflatten_neg", lambda x: x.unflatten(-1, (-1, 3)), [normal(4, 6)]),
    ("unflatten_one", lambda x: x.unflatten(0, (1, 4, 1)), [normal(4, 2)]),
    ("movedim", lambda x: M(x).movedim(x, 0, -1), [normal(2, 3, 4)]),
    ("movedim_multi", lambda x: x.movedim((0, 1), (2, 0)), [normal(2, 3, 4)]),
    ("swapaxes", lambda x: x.swapaxes(0, -1), [normal(2, 3, 4)]),
    ("swapdims", lambda x: x.swapdims(1, 0), [normal(2, 3)]),
    # repeat / flip / tril / triu
    ("repeat", lambda x: x.repeat(2, 3), [normal(2, 3)]),
    ("repeat_lead", lambda x: x.repeat(2, 1, 2), [normal(2, 3)]),
    ("repeat_zero", lambda x: x.repeat(0, 2), [normal(2, 3)]),
    ("repeat_size1", lambda x: x.repeat(3, 2), [normal(1, 1)]),
    ("repeat_0d", lambda x: x.repeat(4), [normal()]),
    ("flip0", lambda x: x.flip(0), [normal(3, 4)]),
    ("flip_many", lambda x: M(x).flip(x, (-1, 0)), [normal(2, 3, 4)]),
    ("flip_none", lambda x: x.flip(()), [normal(2, 3)]),
    ("flip_empty", lambda x: x.flip(1), [normal(0, 3)]),
    ("tril", lambda x: x.tril(), [normal(3, 4)]),
    ("tril_k1", lambda x: M(x).tril(x, 1), [normal(4, 3)]),
    ("tril_batched", lambda x: x.tril(-1), [normal(2, 3, 3)]),
    ("triu", lambda x: x.triu(), [normal(3, 4)]),
    ("triu_k", lambda x: x.triu(-2), [normal(2, 4, 4)]),
    ("triu_size1", lambda x: x.triu(1), [normal(1, 1)]),
    # cat / stack
    ("cat0", lambda a, b: M(a).cat([a, b]), [normal(2, 3), normal(4, 3)]),
    ("cat_neg", lambda a, b: M(a).cat([a, b], -1), [normal(2, 3), normal(2, 1)]),
    ("cat_three", lambda a, b, c: M(a).cat((a, b, c), 1),
     [normal(2, 1, 3), normal(2, 2, 3), normal(2, 4, 3)]),
    ("cat_empty", lambda a, b: M(a).cat([a, b]), [normal(0, 3), normal(2, 3)]),
    ("cat_legacy_empty", lambda a, b: M(a).cat([a, b]), [normal(0), normal(2, 3)]),
    ("cat_one", lambda a: M(a).cat([a], 0), [normal(3)]),
    ("concat", lambda a, b: M(a).concat([a, b], 1), [normal(2, 2), normal(2, 3)]),
    ("concatenate", lambda a, b: M(a).concatenate([a, b]), [normal(1, 2), normal(2, 2)]),
    ("stack0", lambda a, b: M(a).stack([a, b]), [normal(2, 3), normal(2, 3)]),
    ("stack_neg", lambda a, b: M(a).stack([a, b], -1), [normal(2, 3), normal(2, 3)]),
    ("stack_mid", lambda a, b, c: M(a).stack([a, b, c], 1),
     [normal(2, 3), normal(2, 3), normal(2, 3)]),
    ("stack_0d", lambda a, b: M(a).stack([a, b]), [normal(), normal()]),
    ("stack_empty", lambda a, b: M(a).stack([a, b], 1), [normal(0, 2), normal(0, 2)]),
    # split / chunk / narrow / select / unbind
    ("split_int", lambda x: x.split(2), [normal(5, 2)]),
    ("split_sections", lambda x: x.split([1, 3, 1]), [normal(5, 2)]),
    ("split_neg_dim", lambda x: M(x).split(x, 2, -1), [normal(2, 4)]),
    ("split_zero_section", lambda x: x.split([0, 2, 0], 1), [normal(3, 2)]),
    ("split_big", lambda x: x.split(10), [normal(3)]),
    ("split_empty", lambda x: x.split(2), [normal(0, 3)]),
    ("chunk", lambda x: x.chunk(3), [normal(5)]),
    ("chunk_fewer", lambda x: x.chunk(4), [normal(6, 2)]),
    ("chunk_dim", lambda x: M(x).chunk(x, 3, -1), [normal(2, 7)]),
    ("chunk_empty", lambda x: x.chunk(3), [normal(0)]),
    ("narrow", lambda x: x.narrow(1, 1, 3), [normal(2, 5)]),
    ("narrow_neg", lambda x: M(x).narrow(x, -1, -3, 2), [normal(2, 5)]),
    ("narrow_zero", lambda x: x.narrow(0, 2, 0), [normal(2, 5)]),
    ("select", lambda x: x.select(1, -1), [normal(3, 4)]),
    ("select_0d", lambda x: M(x).select(x, 0, 2), [normal(3)]),
    ("select_mid", lambda x: x.select(-2, 0), [normal(2, 1, 3)]),
    ("unbind", lambda x: x.unbind(), [normal(3, 2)]),
    ("unbind_neg", lambda x: M(x).unbind(x, -1), [normal(2, 3)]),
    ("unbind_empty", lambda x: x.unbind(1), [normal(0, 2)]),
    # gather / scatter / index_select / index_add
    ("gather", lambda x, i: x.gather(1, i), [normal(3, 4), ints(4, 3, 5)]),
    ("gather_dim0", lambda x, i: M(x).gather(x, 0, i), [normal(3, 4), ints(3, 2, 4)]),
    ("gather_smaller", lambda x, i: x.gather(-1, i), [normal(3, 4), ints(4, 2, 2)]),
    ("gather_repeat", lambda x, i: x.gather(0, i), [normal(3), np.array([0, 0, 2, 0])]),
    ("gather_empty", lambda x, i: x.gather(1, i), [normal(2, 3), ints(3, 2, 0)]),
    ("scatter_add", lambda x, i, s: x.scatter_add(1, i, s),
     [normal(3, 4), ints(4, 3, 5), normal(3, 5)]),
    ("scatter_src", lambda x, i, s: x.scatter(0, i, s),
     [normal(4, 3), perm_rows(4, 2, 3), normal(2, 3)]),
    ("scatter_value", lambda x, i: x.scatter(1, i, value=1.5),
     [normal(3, 4), ints(4, 3, 2)]),
    ("index_select", lambda x, i: x.index_select(0, i), [normal(4, 3), np.array([0, 2, 2, 1])]),
    ("index_select_neg", lambda x, i: M(x).index_select(x, -1, i), [normal(4, 3), np.array([2])]),
    ("index_select_empty", lambda x, i: x.index_select(1, i),
     [normal(2, 3), np.zeros(0, np.int64)]),
    ("index_select_0d", lambda x, i: x.index_select(0, i), [normal(4, 3), np.array(1)]),
    ("index_add", lambda x, i, s: x.index_add(0, i, s),
     [normal(4, 3), np.array([0, 2, 2]), normal(3, 3)]),
    ("index_add_alpha", lambda x, i, s: x.index_add(-1, i, s, alpha=2.0),
     [normal(2, 3), np.array([1]), normal(2, 1)]),
    # masked_fill / pad
    ("masked_fill", lambda x, m: x.masked_fill(m, 0.5), [normal(3, 4), mask(3, 4)]),
    ("masked_fill_bcast", lambda x, m: x.masked_fill(m, -1.0), [normal(3, 4), mask(4)]),
    ("masked_fill_grow", lambda x, m: M(x).masked_fill(x, m, 2.0), [normal(4), mask(2, 4)]),
    ("masked_fill_0d", lambda x, m: x.masked_fill(m, 3.0), [normal(), mask()]),
    ("pad", lambda x: pad_fn(x, (1, 2)), [normal(2, 3)]),
    ("pad_2d", lambda x: pad_fn(x, (1, 0, 0, 2), value=1.5), [normal(2, 3)]),
    ("pad_crop", lambda x: pad_fn(x, (1, -1, -1, 2)), [normal(2, 3)]),
    ("pad_3d", lambda x: pad_fn(x, (0, 1, 1, 0, 2, 2)), [normal(1, 2, 2)]),
    ("pad_empty", lambda x: pad_fn(x, (1, 1)), [normal(0, 2)]),
    ("pad_reflect", lambda x: pad_fn(x, (2, 1), mode="reflect"), [normal(1, 2, 4)]),
    ("pad_reflect_2d", lambda x: pad_fn(x, (1, 1, 2, 1), mode="reflect"), [normal(1, 2, 3, 4)]),
    ("pad_replicate", lambda x: pad_fn(x, (1, 1, 2, 0), mode="replicate"), [normal(1, 2, 3, 3)]),
    ("pad_circular", lambda x: pad_fn(x, (2, 3), mode="circular"), [normal(1, 2, 4)]),
]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_movement_op(name, fn, inputs):
    check_op(fn, fn, *[x.copy() if isinstance(x, np.ndarray) else x for x in inputs])


def test_scatter_add_with_src_larger_than_index():
    # PyTorch computes the value but has no backward when src is larger than index.
    x, i, s = normal(3, 4), ints(3, 2, 3), normal(3, 4)
    fn = lambda x, i, s: M(x).scatter_add(x, 0, i, s)  # noqa: E731
    check_op(fn, fn, x, i, s, grad=False)
    args = [sf.tensor(x, requires_grad=True), sf.tensor(i), sf.tensor(s, requires_grad=True)]
    assert sf.autograd.gradcheck(fn, args)
    fn(*args).sum().backward()
    assert args[2].grad.shape == (3, 4) and args[2].grad[:, 3].tolist() == [0, 0, 0]


@pytest.mark.parametrize("fn", [
    lambda x: x.split(2), lambda x: x.chunk(2), lambda x: x.unbind(), lambda x: x.narrow(0, 1, 2),
    lambda x: x.select(0, 1), lambda x: x.flatten(), lambda x: x.unflatten(0, (2, 2)),
    lambda x: x.movedim(0, 1), lambda x: x.swapaxes(0, 1),
], ids=["split", "chunk", "unbind", "narrow", "select", "flatten", "unflatten", "movedim",
        "swapaxes"])
def test_views_share_the_version_counter(fn):
    x = sf.zeros(4, 3)
    outs = fn(x)
    outs = outs if isinstance(outs, tuple) else (outs,)
    out = outs[-1]
    assert out._data.base is not None and np.may_share_memory(out.data, x.data)
    with sf.no_grad():
        out.add_(1)
    assert x.version == 1 and out.version == 1
    assert x.numpy().sum() == out.numel()


@pytest.mark.parametrize("fn", [lambda x: x.flip(0), lambda x: x.repeat(1, 1),
                                lambda x: x.tril(), lambda x: sf.cat([x]),
                                lambda x: sf.pad(x, (0, 0))], ids=["flip", "repeat", "tril",
                                                                   "cat", "pad"])
def test_copies_do_not_share_memory(fn):
    x = sf.zeros(3, 3)
    assert not np.may_share_memory(fn(x).data, x.data)


# ---- dtypes ---------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", [(sf.int64, sf.float16), (sf.int64, sf.bool), (sf.int8, sf.uint8),
                                 (sf.float32, sf.float64), (sf.bfloat16, sf.float16)])
def test_cat_and_stack_promote_like_torch(a, b):
    from tests.ops.harness import TORCH_DTYPES

    x, y = sf.ones(2, 3, dtype=a), sf.zeros(2, 3, dtype=b)
    ref = torch.cat([torch.ones(2, 3, dtype=TORCH_DTYPES[a]),
                     torch.zeros(2, 3, dtype=TORCH_DTYPES[b])])
    out = sf.cat([x, y])
    assert TORCH_DTYPES[out.dtype] == ref.dtype
    np.testing.assert_array_equal(out.numpy().astype(np.float64),
                                  ref.to(torch.float64).numpy())
    assert sf.stack([x, y]).dtype is out.dtype


def test_cat_grad_is_cast_back_to_each_input_dtype():
    a = sf.ones(2, dtype=sf.float16, requires_grad=True)
    b = sf.ones(3, dtype=sf.float64, requires_grad=True)
    out = sf.cat([a, b])
    assert out.dtype is sf.float64
    (out * sf.arange(5, dtype=sf.float64)).sum().backward()
    assert a.grad.dtype is sf.float16 and a.grad.tolist() == [0, 1]
    assert b.grad.tolist() == [2, 3, 4]


@pytest.mark.parametrize("dtype", [sf.int64, sf.bool, sf.float16])
def test_ops_keep_non_float_dtypes(dtype):
    x = sf.ones(3, 3, dtype=dtype)
    for out in (x.flip(0), x.tril(), x.repeat(2, 1), sf.pad(x, (1, 1)), x.split(2)[0],
                x.masked_fill(sf.ones(3, 3, dtype=sf.bool), 0), x.index_select(0, sf.tensor([1])),
                x.gather(0, sf.tensor([[0, 1, 2]]))):
        assert out.dtype is dtype


def test_masked_fill_casts_the_value_to_the_tensor_dtype():
    m = torch.tensor([True, False, True])
    ref = torch.zeros(3, dtype=torch.long).masked_fill(m, 2.5)
    out = sf.zeros(3, dtype=sf.int64).masked_fill(sf.tensor(m.numpy()), 2.5)
    assert out.dtype is sf.int64 and out.tolist() == ref.tolist()


# ---- masked_fill_ in place ---------------------------------------------------------------
def test_masked_fill_inplace_matches_torch():
    x0, m0 = normal(3, 4), mask(3, 4)
    xs = sf.tensor(x0, requires_grad=True)
    xt = torch.tensor(x0, requires_grad=True)
    a = xs * 2
    out = a.masked_fill_(sf.tensor(m0), 0.0)
    assert out is a and a.version == 1 and a._version[1] == "masked_fill_"
    at = xt * 2
    at.masked_fill_(torch.tensor(m0), 0.0)
    np.testing.assert_allclose(a.detach().numpy(), at.detach().numpy())
    (a * a).sum().backward()
    (at * at).sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy())


def test_masked_fill_inplace_on_leaf_requiring_grad_is_a_graph_error():
    x = sf.zeros(3, requires_grad=True)
    with pytest.raises(sf.GraphError, match="masked_fill_"):
        x.masked_fill_(sf.tensor([True, False, True]), 1.0)
    with sf.no_grad():
        x.masked_fill_(sf.tensor([True, False, True]), 1.0)
    assert x.tolist() == [1, 0, 1]


def test_masked_fill_inplace_cannot_broadcast_self():
    with pytest.raises(sf.ShapeError):
        sf.zeros(3).masked_fill_(sf.ones(2, 3, dtype=sf.bool), 1.0)


def test_masked_fill_value_tensor_gets_the_filled_places_gradient():
    x = sf.zeros(3, requires_grad=True)
    v = sf.tensor(2.0, requires_grad=True)
    x.masked_fill(sf.tensor([True, False, True]), v).sum().backward()
    assert v.grad.item() == 2 and x.grad.tolist() == [0, 1, 0]  # as PyTorch


# ---- grad of grad ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: M(x).cat([x, x * x], 0), lambda x: x.repeat(2, 1), lambda x: x.flip(1),
    lambda x: x.tril(), lambda x: x.gather(1, _idx(x, [[0, 0], [1, 0]])),
    lambda x: x.index_select(0, _idx(x, [1, 1, 0])), lambda x: x.split(1, 1)[1],
    lambda x: x.masked_fill(_idx(x, [[True, False], [False, False]]), 0.0),
    lambda x: pad_fn(x, (1, -1)), lambda x: pad_fn(x, (1, 1), mode="replicate"),
    lambda x: x.scatter_add(0, _idx(x, [[1, 1]]), x[:1] if isinstance(x, torch.Tensor)
                            else x.narrow(0, 0, 1)),
], ids=["cat", "repeat", "flip", "tril", "gather", "index_select", "split", "masked_fill",
        "pad", "pad_replicate", "scatter_add"])
def test_grad_of_grad(fn):
    x0 = normal(2, 2)
    xs, xt = sf.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    (gs,) = sf.autograd.grad((fn(xs) ** 3).sum(), xs, create_graph=True)
    (gt,) = torch.autograd.grad((fn(xt) ** 3).sum(), xt, create_graph=True)
    np.testing.assert_allclose(gs.detach().numpy(), gt.detach().numpy(), rtol=1e-6)
    (ggs,) = sf.autograd.grad((gs * gs).sum(), xs)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(ggs.numpy(), ggt.numpy(), rtol=1e-6)


def _idx(like, values):
    if isinstance(like, sf.Tensor):
        return sf.tensor(values)
    return torch.tensor(values)


# ---- errors ------------------------------------------------------------------------------------
def test_cat_shape_mismatch_names_every_operand_and_the_dim():
    a, b, c = sf.zeros(2, 3), sf.zeros(2, 3), sf.zeros(2, 4)
    with pytest.raises(sf.ShapeError) as e:
        sf.cat([a, b, c])
    msg = str(e.value)
    assert e.value.op == "cat" and "dim 0" in msg and "tensor 2" in msg and "dim 1" in msg
    assert "[2, 3] float32 cpu" in msg and "[2, 4] float32 cpu" in msg
    assert len(e.value.operands) == 3


@pytest.mark.parametrize("tensors,match", [
    ([sf.zeros(2, 3), sf.zeros(2, 3, 1)], "same number of dims"),
    ([sf.zeros(()), sf.zeros(())], "0-d"),
    ([], "non-empty"),
])
def test_cat_errors(tensors, match):
    with pytest.raises(sf.ShapeError, match=match):
        sf.cat(tensors)


def test_cat_rejects_non_tensors_and_mixed_devices():
    with pytest.raises(sf.DTypeError):
        sf.cat([sf.zeros(2), [1.0, 2.0]])
    with pytest.raises(sf.DTypeError):
        sf.cat(sf.zeros(2))
    with pytest.raises(sf.DeviceError):
        sf.cat([sf.zeros(2), sf.zeros(2, device="meta")])


def test_stack_mismatch_names_both_shapes():
    with pytest.raises(sf.ShapeError) as e:
        sf.stack([sf.zeros(2, 3), sf.zeros(2, 3), sf.zeros(2, 4)])
    assert "[2, 3] at entry 0" in str(e.value) and "[2, 4] at entry 2" in str(e.value)
    assert e.value.op == "stack"


@pytest.mark.parametrize("call,err", [
    (lambda: sf.zeros(5).split([2, 2]), sf.ShapeError),
    (lambda: sf.zeros(5).split([6, -1]), sf.ShapeError),
    (lambda: sf.zeros(5).split(0), sf.ShapeError),
    (lambda: sf.zeros(5).chunk(0), sf.ShapeError),
    (lambda: sf.zeros(5).narrow(0, 3, 3), sf.ShapeError),
    (lambda: sf.zeros(5).select(0, 5), sf.ShapeError),
    (lambda: sf.zeros(5).select(1, 0), sf.ShapeError),
    (lambda: sf.zeros(2, 3).repeat(2), sf.ShapeError),
    (lambda: sf.zeros(2, 3).repeat(2, -1), sf.ShapeError),
    (lambda: sf.zeros(2, 3).flip((0, 0)), sf.ShapeError),
    (lambda: sf.zeros(3).tril(), sf.ShapeError),
    (lambda: sf.zeros(2, 3).flatten(1, 0), sf.ShapeError),
    (lambda: sf.zeros(2, 6).unflatten(1, (4, -1)), sf.ShapeError),
    (lambda: sf.zeros(2, 3).movedim((0, 1), (0, 0)), sf.ShapeError),
    (lambda: sf.zeros(3).gather(0, sf.tensor([0.0])), sf.DTypeError),
    (lambda: sf.zeros(3).gather(0, sf.tensor([3])), sf.ShapeError),
    (lambda: sf.zeros(3).gather(0, sf.tensor([-1])), sf.ShapeError),
    (lambda: sf.zeros(3, 2).gather(0, sf.tensor([0])), sf.ShapeError),
    (lambda: sf.zeros(3, 2).gather(0, sf.tensor([[0, 0, 0]])), sf.ShapeError),
    (lambda: sf.zeros(3).scatter_add(0, sf.tensor([0]), sf.ones(1, dtype=sf.float64)),
     sf.DTypeError),
    (lambda: sf.zeros(3).scatter_add(0, sf.tensor([5]), sf.ones(1)), sf.ShapeError),
    (lambda: sf.zeros(3).index_select(0, sf.tensor([[0]])), sf.ShapeError),
    (lambda: sf.zeros(3).index_select(0, sf.tensor([3])), sf.ShapeError),
    (lambda: sf.zeros(3).index_add(0, sf.tensor([0]), sf.ones(2)), sf.ShapeError),
    (lambda: sf.zeros(3).masked_fill(sf.tensor([1, 0, 1]), 0.0), sf.DTypeError),
    (lambda: sf.zeros(3).masked_fill(sf.tensor([True, False]), 0.0), sf.ShapeError),
    (lambda: sf.pad(sf.zeros(3), (1,)), sf.ShapeError),
    (lambda: sf.pad(sf.zeros(3), (1, 1, 1, 1)), sf.ShapeError),
    (lambda: sf.pad(sf.zeros(3), (-2, -2)), sf.ShapeError),
    (lambda: sf.pad(sf.zeros(1, 3), (3, 0), mode="reflect"), sf.ShapeError),
    (lambda: sf.pad(sf.zeros(1, 3), (1, 0), mode="wrap"), sf.ShapeError),
], ids=lambda c: "" if callable(c) else c.__name__)
def test_errors(call, err):
    with pytest.raises(err):
        call()


def test_errors_are_raised_on_meta_too():
    with pytest.raises(sf.ShapeError):
        sf.cat([sf.zeros(2, 3, device="meta"), sf.zeros(2, 4, device="meta")])
    with pytest.raises(sf.ShapeError):
        sf.zeros(3, 2, device="meta").gather(0, sf.zeros(1, 3, dtype=sf.int64, device="meta"))
    with pytest.raises(sf.DTypeError):
        sf.zeros(3, device="meta").masked_fill(sf.zeros(3, device="meta"), 0.0)


# ---- symbolic sizes on meta ---------------------------------------------------------------
B, L, D = sf.dims("B L D")


def sym(*shape, requires_grad=True):
    return sf.empty(*shape, device="meta", requires_grad=requires_grad)


def same_shape(t, *shape):
    return len(t.shape) == len(shape) and all(sf.shape.dims_equal(a, b) for a, b in
                                              zip(t.shape, shape))


def test_cat_stack_with_symbolic_sizes():
    a, b = sym(B, L, D), sym(B, 2 * L, D)
    out = sf.cat([a, b], 1)
    assert same_shape(out, B, 3 * L, D)
    out.sum().backward()
    assert same_shape(a.grad, B, L, D) and same_shape(b.grad, B, 2 * L, D)
    assert same_shape(sf.cat([a, a], -1), B, L, 2 * D)
    assert same_shape(sf.stack([a, a, a], 1), B, 3, L, D)
    with pytest.raises(sf.ShapeError) as e:
        sf.cat([a, sym(B, L, L)], 1)
    assert "[B, L, D]" in str(e.value) and "[B, L, L]" in str(e.value)
    with pytest.raises(sf.ShapeError):
        sf.stack([a, b])


def test_split_chunk_with_symbolic_sizes():
    x = sym(B, L, 3 * D)
    q, k, v = x.chunk(3, -1)
    assert all(same_shape(t, B, L, D) for t in (q, k, v))
    parts = x.split(D, -1)
    assert len(parts) == 3 and same_shape(parts[2], B, L, D)
    a, b = x.split([D, 2 * D], -1)
    assert same_shape(a, B, L, D) and same_shape(b, B, L, 2 * D)
    (a.sum() + b.sum()).backward()
    assert same_shape(x.grad, B, L, 3 * D)
    with pytest.raises(sf.ShapeError):
        x.split([D, D], -1)
    with pytest.raises(sf.ShapeError):
        x.split(2, 1)  # how many pieces of 2 in L?
    with pytest.raises(sf.ShapeError):
        x.unbind(0)


def test_other_ops_with_symbolic_sizes():
    x = sym(B, L, D)
    assert same_shape(x.flatten(0, 1), B * L, D)
    assert same_shape(x.flatten(0, 1).unflatten(0, (B, L)), B, L, D)
    assert same_shape(x.narrow(1, 1, 2), B, 2, D)
    assert same_shape(x.select(1, -1), B, D)
    assert same_shape(x.repeat(1, 2, 1), B, 2 * L, D)
    assert same_shape(x.flip(1), B, L, D)
    assert same_shape(x.movedim(2, 0), D, B, L)
    assert same_shape(sf.pad(x, (1, 2)), B, L, D + 3)
    assert same_shape(x.tril(), B, L, D)
    idx = sf.zeros(4, dtype=sf.int64, device="meta")
    out = x.index_select(1, idx)
    assert same_shape(out, B, 4, D)
    out.sum().backward()
    assert same_shape(x.grad, B, L, D)


# ---- Hypothesis -----------------------------------------------------------------------------
@st.composite
def split_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6))
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim]
    kind = draw(st.sampled_from(["int", "sections", "chunk"]))
    if kind == "int":
        arg = draw(st.integers(1 if n else 0, max(n, 1) + 1))
    elif kind == "sections":
        cuts = sorted(draw(st.lists(st.integers(0, n), max_size=3)))
        arg = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    else:
        arg = draw(st.integers(1, 5))
    return shape, dim, kind, arg


@given(split_case())
def test_split_chunk_match_torch_and_cat_inverts_them(case):
    shape, dim, kind, arg = case
    x = rng.standard_normal(shape)

    def fn(t):
        return t.chunk(arg, dim) if kind == "chunk" else t.split(arg, dim)

    outs = check_op(fn, fn, x, gradcheck=False)
    back = sf.cat(list(outs), dim)
    np.testing.assert_array_equal(back.detach().numpy(), x.astype(np.float32))


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), st.data())
def test_constant_pad_matches_torch(shape, data):
    k = data.draw(st.integers(1, len(shape)))
    pads = []
    for d in range(k):
        n = shape[len(shape) - 1 - d]
        a = data.draw(st.integers(-n, 3))
        b = data.draw(st.integers(-(n + min(a, 0)), 3))  # torch crops the input first
        pads += [a, b]
    value = data.draw(st.sampled_from([0.0, -2.5]))
    x = rng.standard_normal(shape)
    check_op(lambda t: pad_fn(t, tuple(pads), value=value),
             lambda t: pad_fn(t, tuple(pads), value=value), x, gradcheck=False)


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), st.data())
def test_gather_and_index_select_match_torch(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[dim]
    ishape = tuple(data.draw(st.integers(0, s)) for s in shape)
    ishape = ishape[:dim % len(shape)] + (data.draw(st.integers(0, 4)),) + \
        ishape[dim % len(shape) + 1:]
    index = rng.integers(0, n, size=ishape).astype(np.int64)
    x = rng.standard_normal(shape)
    check_op(lambda t, i: t.gather(dim, i), lambda t, i: t.gather(dim, i), x, index,
             gradcheck=False)
    sel = rng.integers(0, n, size=data.draw(st.integers(0, 5))).astype(np.int64)
    check_op(lambda t, i: t.index_select(dim, i), lambda t, i: t.index_select(dim, i), x, sel,
             gradcheck=False)
