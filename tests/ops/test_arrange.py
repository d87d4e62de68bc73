"""roll, rot90, tile, repeat_interleave, meshgrid, broadcast_tensors, block_diag,
cartesian_prod, expand_as, t, unfold, diagonal, diag_embed, diag, trace, and isclose /
allclose / equal vs PyTorch: values, grads, float64 gradcheck, meta shapes."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(2)


def normal(*shape):
    return np.asarray(rng.standard_normal(shape))


CASES = [
    ("roll_dim", lambda x: sf.roll(x, 2, 1), lambda x: torch.roll(x, 2, 1), (3, 4)),
    ("roll_dims", lambda x: x.roll((1, -1), (0, 2)), lambda x: x.roll((1, -1), (0, 2)),
     (2, 3, 4)),
    ("roll_flat", lambda x: sf.roll(x, 5), lambda x: torch.roll(x, 5), (3, 4)),
    ("rot90_1", lambda x: sf.rot90(x), lambda x: torch.rot90(x), (3, 4)),
    ("rot90_2", lambda x: sf.rot90(x, 2, (1, 2)), lambda x: torch.rot90(x, 2, (1, 2)),
     (2, 3, 4)),
    ("rot90_3", lambda x: x.rot90(3, (0, 1)), lambda x: x.rot90(3, (0, 1)), (3, 4)),
    ("rot90_neg", lambda x: sf.rot90(x, -1), lambda x: torch.rot90(x, -1), (3, 4)),
    ("tile", lambda x: sf.tile(x, (2,)), lambda x: torch.tile(x, (2,)), (2, 3)),
    ("tile_more", lambda x: x.tile((2, 1, 3)), lambda x: x.tile((2, 1, 3)), (2, 3)),
    ("ri_int", lambda x: sf.repeat_interleave(x, 2, 1),
     lambda x: torch.repeat_interleave(x, 2, 1), (2, 3)),
    ("ri_flat", lambda x: x.repeat_interleave(3), lambda x: x.repeat_interleave(3), (2, 2)),
    ("ri_counts", lambda x: sf.repeat_interleave(x, sf.tensor([1, 0, 3]), dim=0),
     lambda x: torch.repeat_interleave(x, torch.tensor([1, 0, 3]), dim=0), (3, 2)),
    ("expand_as", lambda x: x.expand_as(sf.zeros(4, 2, 3)),
     lambda x: x.expand_as(torch.zeros(4, 2, 3)), (2, 1)),
    ("t", lambda x: x.t(), lambda x: x.t(), (2, 3)),
    ("t_1d", lambda x: x.t(), lambda x: x.t(), (3,)),
    ("unfold", lambda x: x.unfold(1, 3, 2), lambda x: x.unfold(1, 3, 2), (2, 7)),
    ("unfold_overlap", lambda x: x.unfold(0, 2, 1), lambda x: x.unfold(0, 2, 1), (5, 2)),
    ("unfold_neg", lambda x: x.unfold(-1, 4, 4), lambda x: x.unfold(-1, 4, 4), (2, 8)),
    ("diagonal", lambda x: x.diagonal(), lambda x: x.diagonal(), (3, 4)),
    ("diagonal_off", lambda x: sf.diagonal(x, 1, 1, 2), lambda x: torch.diagonal(x, 1, 1, 2),
     (2, 3, 4)),
    ("diagonal_neg", lambda x: sf.diagonal(x, -2, -1, 0), lambda x: torch.diagonal(x, -2, -1, 0),
     (4, 3)),
    ("diag_embed", sf.diag_embed, torch.diag_embed, (2, 3)),
    ("diag_embed_off", lambda x: sf.diag_embed(x, -1, 0, 2),
     lambda x: torch.diag_embed(x, -1, 0, 2), (2, 3)),
    ("diag_1d", lambda x: sf.diag(x, 1), lambda x: torch.diag(x, 1), (3,)),
    ("diag_2d", lambda x: x.diag(-1), lambda x: x.diag(-1), (3, 4)),
    ("trace", sf.trace, torch.trace, (3, 4)),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,shape", CASES, ids=[c[0] for c in CASES])
def test_against_torch(name, sf_fn, t_fn, shape):
    check_op(sf_fn, t_fn, normal(*shape))


def test_meshgrid_and_cartesian_prod():
    for indexing in ("ij", "xy"):
        check_op(lambda a, b, c, i=indexing: sf.meshgrid(a, b, c, indexing=i),
                 lambda a, b, c, i=indexing: torch.meshgrid(a, b, c, indexing=i),
                 normal(2), normal(3), normal(4))
    check_op(lambda a, b: sf.meshgrid([a, b]), lambda a, b: torch.meshgrid([a, b],
                                                                           indexing="ij"),
             normal(2), normal(3))
    check_op(sf.cartesian_prod, torch.cartesian_prod, normal(2), normal(3))
    check_op(sf.cartesian_prod, torch.cartesian_prod, normal(2), normal(3), normal(2))


def test_broadcast_tensors_and_block_diag():
    check_op(sf.broadcast_tensors, torch.broadcast_tensors, normal(2, 1), normal(3),
             normal(1, 1, 1))
    check_op(sf.block_diag, torch.block_diag, normal(2, 3), normal(3), normal(1, 1))
    out = sf.block_diag(sf.tensor(2), sf.tensor([[1, 2]]))
    assert out.tolist() == torch.block_diag(torch.tensor(2), torch.tensor([[1, 2]])).tolist()
    with pytest.raises(sf.ShapeError, match="broadcast_tensors"):
        sf.broadcast_tensors(sf.zeros(2), sf.zeros(3))


def test_repeat_interleave_counts_only_and_errors():
    assert sf.repeat_interleave(sf.tensor([2, 0, 1])).tolist() == [0, 0, 2]
    x = sf.zeros(3, 2)
    with pytest.raises(sf.ShapeError, match="one count per element"):
        sf.repeat_interleave(x, sf.tensor([1, 2]), dim=0)
    m = sf.zeros(3, 2, device="meta")
    with pytest.raises(sf.ShapeError, match="output_size"):
        sf.repeat_interleave(m, sf.tensor([1, 2, 3]).to("meta"), dim=0)
    out = sf.repeat_interleave(m, sf.tensor([1, 2, 3]).to("meta"), dim=0, output_size=6)
    assert tuple(out.shape) == (6, 2)
    assert tuple(sf.repeat_interleave(sf.tensor(5.0), 3).shape) == (3,)


def test_unfold_is_a_view_and_windows_add_their_gradients():
    x = sf.arange(6.0)
    w = x.unfold(0, 3, 1)
    assert np.shares_memory(w.numpy(), x.numpy())
    a = sf.arange(5.0).requires_grad_(True)
    a.unfold(0, 3, 1).sum().backward()
    assert a.grad.tolist() == [1.0, 2.0, 3.0, 2.0, 1.0]
    with pytest.raises(sf.ShapeError, match="larger than"):
        sf.zeros(2, 3).unfold(1, 4, 1)
    m = sf.zeros(2, 9, device="meta").unfold(1, 3, 2)
    assert tuple(m.shape) == (2, 4, 3)


def test_diagonal_is_a_writable_view():
    x = sf.ones(3, 3)
    x.diagonal().fill_(0.0)
    assert x.tolist() == [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
    with pytest.raises(sf.ShapeError, match="diagonal"):
        sf.zeros(3).diagonal()
    with pytest.raises(sf.ShapeError, match="trace"):
        sf.zeros(2, 2, 2).trace()
    with pytest.raises(sf.ShapeError, match="t:"):
        sf.zeros(2, 2, 2).t()


def test_grad_of_grad_through_diagonal_and_unfold():
    x = sf.tensor(normal(3, 3), requires_grad=True)
    t = torch.tensor(x.detach().numpy(), requires_grad=True)
    (gs,) = sf.autograd.grad((x.diagonal() ** 2).sum() + (x.unfold(1, 2, 1) ** 3).sum(), x,
                             create_graph=True)
    (gt,) = torch.autograd.grad((t.diagonal() ** 2).sum() + (t.unfold(1, 2, 1) ** 3).sum(), t,
                                create_graph=True)
    (gs * gs).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(-5, 5), st.data())
def test_roll_any_shape(shape, shift, data):
    x = normal(*shape)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    np.testing.assert_array_equal(sf.roll(sf.tensor(x), shift, dim).numpy(),
                                  torch.roll(torch.from_numpy(x), shift, dim).numpy())
    size = data.draw(st.integers(1, shape[dim]))
    step = data.draw(st.integers(1, 3))
    np.testing.assert_array_equal(sf.tensor(x).unfold(dim, size, step).numpy(),
                                  torch.from_numpy(x).unfold(dim, size, step).numpy())


CLOSE = [
    ([1.0, 2.0, np.nan, np.inf, -np.inf, 1.0], [1.0 + 1e-9, 2.1, np.nan, np.inf, np.inf, 1.00001]),
]


@pytest.mark.parametrize("a,b", CLOSE)
@pytest.mark.parametrize("kw", [{}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 0.2, "rtol": 0}])
def test_isclose_allclose(a, b, kw):
    sa, sb = sf.tensor(a, dtype=sf.float64), sf.tensor(b, dtype=sf.float64)
    ta, tb = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    assert sf.isclose(sa, sb, **kw).tolist() == torch.isclose(ta, tb, **kw).tolist()
    assert sa.allclose(sb, **kw) == torch.allclose(ta, tb, **kw)
    assert sf.allclose(sa[:2], sb[:1], rtol=0.2) == torch.allclose(ta[:2], tb[:1], rtol=0.2)


def test_equal_and_int_isclose():
    assert sf.equal(sf.tensor([1, 2]), sf.tensor([1, 2]))
    assert not sf.equal(sf.tensor([1, 2]), sf.tensor([1, 2, 3]))
    assert not sf.tensor([float("nan")]).equal(sf.tensor([float("nan")]))
    assert sf.isclose(sf.tensor([1, 2]), sf.tensor([1, 3])).tolist() == [True, False]
    with pytest.raises(sf.DeviceError):
        sf.allclose(sf.zeros(2, device="meta"), sf.zeros(2, device="meta"))
    assert tuple(sf.isclose(sf.zeros(2, 1, device="meta"), sf.zeros(3, device="meta")).shape) \
        == (2, 3)


def test_is_contiguous_and_apply_():
    x = sf.zeros(2, 3)
    assert x.is_contiguous() and not x.t().is_contiguous()
    assert not x[:, ::2].is_contiguous() and x.t().contiguous().is_contiguous()
    assert not sf.zeros(3, 1).expand(3, 4).is_contiguous()
    m = sf.zeros(2, 3, device="meta")
    assert m.is_contiguous() and not m.t().is_contiguous()
    t = torch.zeros(2, 3)
    assert t.t().is_contiguous() == x.t().is_contiguous()
    y = sf.tensor([1.0, 2.0, 3.0])
    v = y._version[0]
    assert y.apply_(lambda e: e * 10 + 1) is y
    assert y.tolist() == [11.0, 21.0, 31.0] and y._version[0] == v + 1
    with pytest.raises(sf.GraphError, match="apply_"):
        sf.ones(2, requires_grad=True).apply_(abs)
    with pytest.raises(sf.DeviceError):
        m.apply_(abs)
    assert sf.ones(2, 2).new_empty(3, 1).shape == (3, 1)
