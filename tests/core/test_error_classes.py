"""Each mistake raises a shapeflow error that is also the builtin PyTorch raises for it.

The table names PyTorch's exception type, and each row runs the same mistake on PyTorch
first to confirm it, so a ported `except IndexError` / `except RuntimeError` keeps working.
"""

import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F

FNS = {sf: F, torch: TF}


def x2(L):
    return L.ones(2, 3)


def long(L, *size, fill=0):
    return L.full(size, fill, dtype=L.int64)


CASES = [
    # dims and indices out of range: IndexError
    ("sum dim", lambda L, F: x2(L).sum(5), IndexError),
    ("mean negative dim", lambda L, F: x2(L).mean(-4), IndexError),
    ("var dim", lambda L, F: x2(L).var(5), IndexError),
    ("max dim", lambda L, F: x2(L).max(5), IndexError),
    ("argmax dim", lambda L, F: x2(L).argmax(5), IndexError),
    ("squeeze dim", lambda L, F: x2(L).squeeze(4), IndexError),
    ("unsqueeze dim", lambda L, F: x2(L).unsqueeze(4), IndexError),
    ("stack dim", lambda L, F: L.stack([x2(L), x2(L)], 4), IndexError),
    ("cat dim", lambda L, F: L.cat([x2(L), x2(L)], 5), IndexError),
    ("cumsum dim", lambda L, F: x2(L).cumsum(3), IndexError),
    ("softmax dim", lambda L, F: x2(L).softmax(5), IndexError),
    ("transpose dim", lambda L, F: x2(L).transpose(0, 5), IndexError),
    ("permute dim", lambda L, F: x2(L).permute(0, 5), IndexError),
    ("flip dim", lambda L, F: x2(L).flip(5), IndexError),
    ("flatten dim", lambda L, F: x2(L).flatten(0, 5), IndexError),
    ("movedim dim", lambda L, F: x2(L).movedim(0, 5), IndexError),
    ("split dim", lambda L, F: x2(L).split(1, 5), IndexError),
    ("chunk dim", lambda L, F: x2(L).chunk(2, 5), IndexError),
    ("unbind dim", lambda L, F: x2(L).unbind(5), IndexError),
    ("gather dim", lambda L, F: L.gather(x2(L), 4, long(L, 2, 3)), IndexError),
    ("slice index", lambda L, F: x2(L)[5], IndexError),
    ("slice negative index", lambda L, F: x2(L)[:, -4], IndexError),
    ("too many indices", lambda L, F: x2(L)[0, 0, 0], IndexError),
    ("select index", lambda L, F: x2(L).select(0, 5), IndexError),
    ("index_select index", lambda L, F: L.index_select(x2(L), 0, L.tensor([5])), IndexError),
    ("embedding index", lambda L, F: F.embedding(L.tensor([5]), L.ones(3, 2)), IndexError),
    ("cross_entropy target class",
     lambda L, F: F.cross_entropy(L.ones(4, 3), long(L, 4, fill=7)), IndexError),
    # sizes that do not fit: RuntimeError
    ("cat of 0-d tensors", lambda L, F: L.cat([L.tensor(1.0), L.tensor(2.0)]), RuntimeError),
    ("cat sizes", lambda L, F: L.cat([x2(L), L.ones(3, 2)]), RuntimeError),
    ("stack sizes", lambda L, F: L.stack([x2(L), L.ones(3, 2)]), RuntimeError),
    ("matmul", lambda L, F: x2(L) @ x2(L), RuntimeError),
    ("mm", lambda L, F: L.mm(x2(L), x2(L)), RuntimeError),
    ("bmm", lambda L, F: L.bmm(L.ones(2, 3, 4), L.ones(3, 4, 5)), RuntimeError),
    ("dot", lambda L, F: L.dot(L.ones(3), L.ones(4)), RuntimeError),
    ("einsum", lambda L, F: L.einsum("ij,jk->ik", x2(L), x2(L)), RuntimeError),
    ("gather rank", lambda L, F: L.gather(x2(L), 1, long(L, 2, 3, 1)), RuntimeError),
    ("scatter rank", lambda L, F: x2(L).scatter(1, long(L, 2, 3, 1), 1.0), RuntimeError),
    ("permute length", lambda L, F: x2(L).permute(0), RuntimeError),
    ("reshape", lambda L, F: x2(L).reshape(4, 2), RuntimeError),
    ("view", lambda L, F: x2(L).view(4, 2), RuntimeError),
    ("expand", lambda L, F: x2(L).expand(4, 3), RuntimeError),
    ("broadcast add", lambda L, F: x2(L) + L.ones(4), RuntimeError),
    ("where broadcast", lambda L, F: L.where(x2(L) > 0, L.ones(4), L.ones(3)), RuntimeError),
    ("masked_fill", lambda L, F: x2(L).masked_fill(L.ones(4) > 0, 1.0), RuntimeError),
    ("narrow", lambda L, F: x2(L).narrow(1, 2, 5), RuntimeError),
    ("repeat", lambda L, F: x2(L).repeat(2), RuntimeError),
    ("tril of 1-D", lambda L, F: L.ones(3).tril(), RuntimeError),
    ("conv2d channels", lambda L, F: F.conv2d(L.ones(1, 3, 5, 5), L.ones(4, 2, 3, 3)),
     RuntimeError),
    ("linear", lambda L, F: F.linear(x2(L), L.ones(4, 5)), RuntimeError),
    ("layer_norm", lambda L, F: F.layer_norm(x2(L), (4,)), RuntimeError),
    ("max_pool2d kernel", lambda L, F: F.max_pool2d(L.ones(1, 1, 2, 2), 3), RuntimeError),
    ("pad length", lambda L, F: F.pad(x2(L), (1, 1, 1, 1, 1, 1)), RuntimeError),
    # PyTorch's ValueError stays a ValueError
    ("cross_entropy batch",
     lambda L, F: F.cross_entropy(L.ones(4, 3), long(L, 5)), ValueError),
    ("nll_loss batch", lambda L, F: F.nll_loss(L.ones(4, 3), long(L, 5)), ValueError),
    # dtypes and integer arithmetic
    ("int to negative int power", lambda L, F: L.tensor([2, 3]) ** -1, RuntimeError),
    ("invert a float", lambda L, F: ~L.tensor([1.0]), TypeError),
    ("bitwise and of floats", lambda L, F: L.tensor([1.0]) & L.tensor([1.0]),
     NotImplementedError),
    ("shift a float", lambda L, F: L.tensor([1.0]) << 1, NotImplementedError),
    ("int floor division by zero", lambda L, F: L.tensor([1, 2]) // 0, RuntimeError),
    ("int remainder by zero", lambda L, F: L.tensor([1, 2]) % L.tensor([0, 1]), RuntimeError),
    ("int fmod by zero", lambda L, F: L.fmod(L.tensor([1, 2]), 0), RuntimeError),
    ("div rounding mode", lambda L, F: L.div(x2(L), 2, rounding_mode="up"), RuntimeError),
]


@pytest.mark.parametrize("name,mistake,builtin", CASES, ids=[c[0] for c in CASES])
def test_error_is_the_builtin_pytorch_raises(name, mistake, builtin):
    with pytest.raises(Exception) as te:
        mistake(torch, TF)
    assert isinstance(te.value, builtin), f"PyTorch raised {type(te.value).__name__}"
    with pytest.raises(Exception) as se:
        mistake(sf, F)
    err = se.value
    assert isinstance(err, sf.ShapeflowError), f"{type(err).__name__}: {err}"
    assert isinstance(err, builtin), f"{type(err).__mro__}"


def test_table_is_large_enough():
    assert len(CASES) >= 40


def test_kinds_are_kept():
    """The concrete classes stay their shapeflow kind (and that kind's builtin)."""
    from shapeflow import errors

    assert issubclass(errors.ShapeIndexError, sf.ShapeError)
    assert issubclass(errors.ShapeRuntimeError, sf.ShapeError)
    assert issubclass(errors.DTypeRuntimeError, sf.DTypeError)
    assert issubclass(errors.DTypeNotImplementedError, RuntimeError)
    for cls in (errors.ShapeIndexError, errors.ShapeRuntimeError):
        assert cls.kind == "ShapeError" and issubclass(cls, ValueError)
    e = errors.ShapeIndexError("x: dim 5 out of range", op="x", hint="h")
    assert "hint" in str(e) and e.op == "x"


def test_errors_pickle_with_their_class():
    import pickle

    from shapeflow import errors

    e = pickle.loads(pickle.dumps(errors.ShapeIndexError("m", op="sum")))
    assert type(e) is errors.ShapeIndexError and e.op == "sum"
