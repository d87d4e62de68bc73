"""matmul (every rank PyTorch accepts), mm/bmm/mv/dot, outer and einsum vs PyTorch."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(0)


def normal(shape):
    return rng.standard_normal(shape)


# ---- matmul --------------------------------------------------------------------------------
MATMUL = [
    ((3,), (3,)),            # 1-D @ 1-D: a 0-d dot product
    ((1,), (1,)),
    ((3,), (3, 4)),          # 1-D @ 2-D
    ((2, 3), (3,)),          # 2-D @ 1-D
    ((2, 3), (3, 4)),
    ((1, 1), (1, 1)),
    ((2, 2, 3), (3,)),       # batched @ 1-D
    ((3,), (2, 3, 4)),       # 1-D @ batched
    ((2, 2, 3), (2, 3, 4)),
    ((2, 2, 3), (3, 4)),     # batched @ 2-D (the 2-D one broadcasts)
    ((2, 3), (2, 3, 2)),
    ((2, 1, 3, 4), (3, 4, 2)),  # batch dims broadcast: (2, 1) with (3,)
    ((1, 2, 3), (4, 3, 2)),
    ((0, 3), (3, 2)),        # empty rows
    ((2, 0), (0, 3)),        # empty contraction: zeros
    ((2, 0, 3), (3,)),
]


@pytest.mark.parametrize("sa,sb", MATMUL, ids=str)
def test_matmul_ranks(sa, sb):
    check_op(lambda a, b: a @ b, lambda a, b: a @ b, normal(sa), normal(sb))
    check_op(sf.matmul, torch.matmul, normal(sa), normal(sb), gradcheck=False, meta=False)


def test_matmul_broadcast_batch_dims_from_the_issue():
    check_op(lambda a, b: a @ b, lambda a, b: a @ b, normal((2, 1, 3, 4)), normal((5, 4, 2)),
             gradcheck=False)


def test_matmul_int_and_method():
    a, b = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    out = sf.from_numpy(a).matmul(sf.from_numpy(b))
    assert out.dtype is sf.int64
    assert out.tolist() == (torch.from_numpy(a) @ torch.from_numpy(b)).tolist()


@pytest.mark.parametrize("sa,sb,hint", [
    ((3, 4), (3, 5), "a.mT @ b"),        # the first operand is transposed
    ((3, 4), (5, 4), "a @ b.mT"),        # the second operand is transposed
    ((2, 3, 4), (2, 3, 5), "a.mT @ b"),
    ((3, 4), (3,), "a.mT @ b"),
    ((3,), (4, 3), "a @ b.mT"),
    ((2, 3), (4, 5), None),              # neither orientation fits: no hint
])
def test_contraction_mismatch(sa, sb, hint):
    with pytest.raises(RuntimeError):
        torch.ones(sa) @ torch.ones(sb)
    with pytest.raises(sf.ShapeError) as e:
        sf.ones(*sa) @ sf.ones(*sb)
    msg = str(e.value)
    assert e.value.op == "matmul" and "contraction" in msg
    assert str(list(sa)).replace(" ", "") in msg.replace(" ", "")
    assert str(list(sb)).replace(" ", "") in msg.replace(" ", "")
    if hint is None:
        assert e.value.hint is None
    else:
        assert hint in e.value.hint


def test_matmul_other_errors():
    with pytest.raises(sf.ShapeError, match="at least 1 dim"):
        sf.ones(3) @ sf.tensor(2.0)
    with pytest.raises(sf.DTypeError, match="float64"):
        sf.ones(2, 3) @ sf.ones(3, 2, dtype=sf.float64)
    with pytest.raises(sf.ShapeError, match="batch"):
        sf.ones(2, 3, 4) @ sf.ones(3, 4, 5)
    with pytest.raises(sf.ShapeError):  # same on the meta device
        sf.ones(2, 3, device="meta") @ sf.ones(4, 5, device="meta")


@given(st.integers(0, 2), st.integers(0, 2), st.sampled_from([1, 2]), st.sampled_from([1, 3]),
       st.booleans(), st.booleans())
def test_matmul_batch_broadcast_hypothesis(lead_a, lead_b, n, m, one_a, one_b):
    batch = [2, 3][:max(lead_a, lead_b)]
    sa = tuple(1 if one_a else s for s in batch[len(batch) - lead_a:]) + (n, 2)
    sb = tuple(1 if one_b else s for s in batch[len(batch) - lead_b:]) + (2, m)
    check_op(lambda a, b: a @ b, lambda a, b: a @ b, normal(sa), normal(sb), gradcheck=False)


# ---- mm / bmm / mv / dot / outer ------------------------------------------------------------
WRAPPERS = [
    ("mm", (2, 3), (3, 4)), ("mm", (1, 1), (1, 2)), ("bmm", (2, 2, 3), (2, 3, 2)),
    ("bmm", (1, 2, 3), (1, 3, 1)), ("mv", (2, 3), (3,)), ("dot", (3,), (3,)),
    ("dot", (1,), (1,)), ("outer", (3,), (2,)),
]


@pytest.mark.parametrize("name,sa,sb", WRAPPERS, ids=[f"{w[0]}-{w[1]}-{w[2]}" for w in WRAPPERS])
def test_thin_wrappers(name, sa, sb):
    check_op(getattr(sf, name), getattr(torch, name), normal(sa), normal(sb))
    check_op(lambda a, b: getattr(a, name)(b), lambda a, b: getattr(a, name)(b), normal(sa),
             normal(sb), gradcheck=False, meta=False)


@pytest.mark.parametrize("name,sa,sb", [
    ("mm", (2, 3), (3,)), ("mm", (2, 2, 3), (3, 2)), ("bmm", (2, 3), (3, 2)),
    ("bmm", (2, 2, 3), (3, 2)), ("mv", (2, 3), (3, 1)), ("mv", (3,), (3,)),
    ("dot", (3,), (3, 1)), ("dot", (2, 3), (3,)), ("outer", (2, 3), (3,)),
])
def test_thin_wrappers_check_ranks(name, sa, sb):
    with pytest.raises(RuntimeError):
        getattr(torch, name)(torch.ones(sa), torch.ones(sb))
    with pytest.raises(sf.ShapeError) as e:
        getattr(sf, name)(sf.ones(*sa), sf.ones(*sb))
    assert e.value.op == name and str(e.value).startswith(name)


@pytest.mark.parametrize("name,sa,sb", [
    ("mm", (2, 3), (4, 5)), ("bmm", (2, 3, 4), (2, 5, 6)), ("bmm", (2, 3, 4), (3, 4, 5)),
    ("bmm", (2, 3, 4), (1, 4, 5)), ("mv", (3, 4), (5,)), ("dot", (3,), (4,)),
])
def test_thin_wrappers_check_sizes(name, sa, sb):
    with pytest.raises(RuntimeError):
        getattr(torch, name)(torch.ones(sa), torch.ones(sb))
    with pytest.raises(sf.ShapeError) as e:
        getattr(sf, name)(sf.ones(*sa), sf.ones(*sb))
    assert e.value.op == name
    assert str(list(sa)) in str(e.value) and str(list(sb)) in str(e.value)


def test_mm_transpose_hint_and_dot_dtype():
    with pytest.raises(sf.ShapeError) as e:
        sf.mm(sf.ones(3, 4), sf.ones(5, 4))
    assert "b.mT" in e.value.hint
    with pytest.raises(sf.DTypeError):
        sf.dot(sf.ones(3), sf.ones(3, dtype=sf.float64))


# ---- einsum -------------------------------------------------------------------------------
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 4, 2)]),
    ("i,i->", [(3,), (3,)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij->ji", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),                      # implicit: the trace
    ("iij->j", [(2, 2, 3)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),  # '...' dims broadcast
    ("...ij,...jk", [(2, 2, 3), (2, 3, 2)]),            # implicit with '...'
    ("...ij->ij", [(2, 3, 4)]),                         # '...' summed away
    ("i...->...", [(2, 3, 2)]),
    ("bld,hd->blh", [(2, 3, 2), (4, 2)]),
    ("ij,jk", [(2, 3), (3, 4)]),                        # implicit output: ik
    ("ba", [(2, 3)]),                                   # implicit output is sorted: ab
    ("Ba,ac", [(2, 3), (3, 2)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("ij,jk->ik", [(2, 1), (3, 4)]),                    # size-1 subscripts broadcast
    ("i,i->i", [(1,), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),        # three operands (optimized path)
    ("ab,cd->", [(2, 3), (1, 2)]),
    (",i->i", [(), (3,)]),
    ("i j , j k -> i k", [(2, 3), (3, 4)]),             # spaces
    ("ij,jk->ik", [(0, 3), (3, 2)]),                    # empty
    ("i,i->", [(0,), (0,)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[f"{e}-{s}" for e, s in EINSUM])
def test_einsum(eq, shapes):
    arrays = [normal(s) for s in shapes]
    check_op(lambda *xs: sf.einsum(eq, *xs), lambda *xs: torch.einsum(eq, *xs), *arrays)


def test_einsum_list_of_operands_and_large_sizes():
    a, b = normal((16, 20)), normal((20, 17))  # above the optimize threshold (BLAS)
    check_op(lambda x, y: sf.einsum("ij,jk->ik", [x, y]),
             lambda x, y: torch.einsum("ij,jk->ik", [x, y]), a, b, gradcheck=False, rtol=1e-4)
    a, b = normal((2, 3, 8, 16)), normal((2, 3, 8, 16))
    check_op(lambda x, y: sf.einsum("bhqd,bhkd->bhqk", x, y),
             lambda x, y: torch.einsum("bhqd,bhkd->bhqk", x, y), a, b, gradcheck=False,
             rtol=1e-4, atol=1e-5)


def test_einsum_int_dtype_and_half():
    a, b = np.arange(6).reshape(2, 3), np.arange(12).reshape(3, 4)
    out = sf.einsum("ij,jk->ik", sf.from_numpy(a), sf.from_numpy(b))
    assert out.dtype is sf.int64
    assert out.tolist() == torch.einsum("ij,jk->ik", torch.from_numpy(a),
                                        torch.from_numpy(b)).tolist()
    h = normal((2, 3)).astype(np.float16)
    out = sf.einsum("ij,ij->i", sf.from_numpy(h), sf.from_numpy(h))
    assert out.dtype is sf.float16


def test_einsum_output_does_not_alias_its_input():
    x = sf.tensor([[1.0, 2.0], [3.0, 4.0]])
    for eq in ("ij->ji", "ii->i", "ij->ij"):
        out = sf.einsum(eq, x)
        out._data[...] = 0
        assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_einsum_grad_of_grad():
    a, b = normal((2, 3)), normal((3, 2))
    sa, sb = sf.tensor(a, requires_grad=True), sf.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    gs = sf.autograd.grad((sf.einsum("ij,jk->ik", sa, sb) ** 2).sum(), [sa, sb],
                          create_graph=True)
    gt = torch.autograd.grad((torch.einsum("ij,jk->ik", ta, tb) ** 2).sum(), [ta, tb],
                             create_graph=True)
    ggs = sf.autograd.grad((gs[0] * gs[1].mT).sum(), [sa, sb])
    ggt = torch.autograd.grad((gt[0] * gt[1].mT).sum(), [ta, tb])
    for x, y in zip(ggs, ggt):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6)


def test_einsum_only_needed_operands_are_saved():
    w = sf.tensor(normal((3, 2)))
    x = sf.tensor(normal((2, 3)), requires_grad=True)
    out = sf.einsum("ij,jk->ik", x, w)
    entries = out.grad_fn._entries
    assert [e.index for e in entries] == [1]  # x's gradient needs only w


@pytest.mark.parametrize("eq,shapes,words", [
    ("ij,jk->ik", [(2, 3), (4, 5)], ["subscript j", "3", "4", "operand 0", "operand 1",
                                     "[2, 3]", "[4, 5]"]),
    ("bij,bjk->bik", [(2, 2, 3), (3, 3, 2)], ["subscript b", "2", "3"]),
    ("ij,jk->ik", [(2, 3)], ["2 operand", "1 tensor"]),
    ("ij->i", [(2, 3), (3,)], ["1 operand", "2 tensor"]),
    ("ii->i", [(2, 3)], ["repeated", "2 != 3"]),
    ("i->ii", [(3,)], ["more than once"]),
    ("i->j", [(3,)], ["does not appear"]),
    ("ij", [(3,)], ["1 dims", "'ij'"]),
    ("ijk", [(2, 3)], ["2 dims"]),
    ("i1", [(2, 3)], ["invalid subscript"]),
    ("i.j", [(2, 3)], ["..."]),
    ("...i,...i->...", [(4, 2, 3), (5, 3)], ["'...' dim -1", "2", "5"]),
])
def test_einsum_errors(eq, shapes, words):
    with pytest.raises((RuntimeError, ValueError)):
        torch.einsum(eq, *[torch.ones(s) for s in shapes])
    for device in ("cpu", "meta"):
        with pytest.raises(sf.ShapeError) as e:
            sf.einsum(eq, *[sf.ones(*s, device=device) for s in shapes])
        msg = str(e.value)
        assert e.value.op == "einsum" and msg.startswith("einsum")
        for w in words:
            assert w in msg, (w, msg)


def test_einsum_dtype_errors():
    with pytest.raises(sf.DTypeError, match="float64"):
        sf.einsum("i,i->", sf.ones(3), sf.ones(3, dtype=sf.float64))
    with pytest.raises(sf.DTypeError, match="bool"):
        sf.einsum("i,i->", sf.ones(3, dtype=sf.bool), sf.ones(3, dtype=sf.bool))
    with pytest.raises(sf.ShapeError):
        sf.einsum("i->i")


def test_einsum_on_symbolic_sizes():
    symbolic = pytest.importorskip("shapeflow.symbolic")
    B, D = symbolic.Dim("B"), symbolic.Dim("D")
    a = sf.empty(B, 3, D, device="meta")
    b = sf.empty(D, 4, device="meta")
    out = sf.einsum("bld,dh->blh", a, b)
    assert out.shape[0] is B or out.shape[0] == B
    with pytest.raises(sf.ShapeError, match="subscript d"):
        sf.einsum("bld,dh->blh", a, sf.empty(3, 4, device="meta"))
