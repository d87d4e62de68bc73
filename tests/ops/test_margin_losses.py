"""Hinge-embedding, multi-class, multi-label and triplet margin losses against PyTorch: values,
gradients (float32 and float64 gradcheck), meta shapes, errors and the nn modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.errors import DTypeError, ShapeError, ShapeIndexError, ShapeRuntimeError
from tests.ops.harness import check_op

rng = np.random.default_rng(0)
REDUCTIONS = ("none", "mean", "sum")


def _x(*shape):
    return rng.standard_normal(shape)


def _ids(high, *shape, low=0):
    return rng.integers(low, high, shape).astype(np.int64)


def _const(w, like):
    """A constant (weight) on like's device and dtype: the meta check replays on meta."""
    return sf.tensor(w, device=like.device).to(like.dtype)


def _pm1(*shape):
    return np.where(rng.random(shape) > 0.5, 1.0, -1.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,margin", [((4, 5), 1.0), ((7,), -2.5), ((), 0.3), ((2, 3, 4), 2.0)])
def test_hinge_embedding_loss(shape, margin, reduction):
    x, t = _x(*shape), _pm1(*shape)
    check_op(lambda a, b: F.hinge_embedding_loss(a, b, margin, reduction=reduction),
             lambda a, b: TF.hinge_embedding_loss(a, b, margin, reduction=reduction), x, t)
    assert sf.hinge_embedding_loss is F.hinge_embedding_loss


def test_hinge_embedding_loss_broadcasts_target():
    x, t = _x(3, 4), _pm1(4)
    check_op(lambda a, b: F.hinge_embedding_loss(a, b, reduction="none"),
             lambda a, b: TF.hinge_embedding_loss(a, b, reduction="none"), x, t)


MULTI_MARGIN = [
    ((), _ids(1), {}),
    ((5,), _ids(5, 1), {"p": 2}),
    ((5,), _ids(5), {"p": 1}),
    ((4, 6), _ids(6, 4), {"margin": -3.14}),
    ((4, 6), _ids(6, 4), {"p": 2, "margin": 0.5}),
    ((6, 3), _ids(3, 6), {"weight": rng.uniform(-10, 10, 3)}),
    ((6, 3), _ids(3, 6), {"weight": rng.uniform(0.1, 2, 3), "p": 2}),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,target,kw", MULTI_MARGIN)
def test_multi_margin_loss(shape, target, kw, reduction):
    kw = dict(kw)
    w = kw.pop("weight", None)
    x = _x(*shape)
    if w is None:
        check_op(lambda a, y: F.multi_margin_loss(a, y, reduction=reduction, **kw),
                 lambda a, y: TF.multi_margin_loss(a, y, reduction=reduction, **kw), x, target)
    else:  # the weight is a constant (PyTorch has no gradient for it)
        check_op(lambda a, y: F.multi_margin_loss(a, y, weight=_const(w, a), reduction=reduction,
                                                  **kw),
                 lambda a, y: TF.multi_margin_loss(a, y, weight=torch.tensor(w).to(a.dtype),
                                                   reduction=reduction, **kw), x, target)


MULTILABEL = [
    ((), np.array(0)),
    ((), np.array(-1)),
    ((5,), _ids(5, 5)),
    ((7,), np.array([2, 0, 6, -1, 4, -1, 6])),
    ((4, 5), np.array([[4, -1, 0, -1, 2], [0, 0, 4, 1, 4], [-1, 3, -1, 1, 0], [4, 3, 2, 1, 0]])),
    ((3, 6), _ids(6, 3, 6, low=-1)),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,target", MULTILABEL)
def test_multilabel_margin_loss(shape, target, reduction):
    check_op(lambda a, y: F.multilabel_margin_loss(a, y, reduction=reduction),
             lambda a, y: TF.multilabel_margin_loss(a, y, reduction=reduction),
             _x(*shape), target.astype(np.int64))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,weighted", [((5,), False), ((4, 5), True), ((2, 3, 4), False)])
def test_multilabel_soft_margin_loss(shape, weighted, reduction):
    t = rng.random(shape)
    if not weighted:
        check_op(lambda a, y: F.multilabel_soft_margin_loss(a, y, reduction=reduction),
                 lambda a, y: TF.multilabel_soft_margin_loss(a, y, reduction=reduction),
                 _x(*shape), t)
        return
    w = rng.random(shape[-1])
    check_op(lambda a, y: F.multilabel_soft_margin_loss(a, y, _const(w, a),
                                                        reduction=reduction),
             lambda a, y: TF.multilabel_soft_margin_loss(a, y, torch.tensor(w).to(a.dtype),
                                                         reduction=reduction),
             _x(*shape), t)


TRIPLET_KW = [{}, {"margin": 1e-6}, {"margin": 10.0}, {"swap": True}, {"p": 1},
              {"p": 3.0, "eps": 0.1}, {"reduction": "none"}, {"reduction": "sum", "swap": True}]


@pytest.mark.parametrize("kw", TRIPLET_KW)
@pytest.mark.parametrize("shape", [(5, 7), (7,), (2, 3, 4)])
def test_triplet_margin_loss(shape, kw):
    a, p, n = _x(*shape), _x(*shape), _x(*shape)
    check_op(lambda *t: F.triplet_margin_loss(*t, **kw),
             lambda *t: TF.triplet_margin_loss(*t, **kw), a, p, n)
    assert sf.triplet_margin_loss is F.triplet_margin_loss


@pytest.mark.parametrize("kw", [{}, {"swap": True, "margin": 2.0}, {"reduction": "none"}])
def test_triplet_margin_with_distance_loss(kw):
    a, p, n = _x(5, 7), _x(5, 7), _x(5, 7)
    check_op(lambda *t: F.triplet_margin_with_distance_loss(*t, **kw),
             lambda *t: TF.triplet_margin_with_distance_loss(*t, **kw), a, p, n)

    def cos(u, v):
        return 1 - F.cosine_similarity(u, v)

    def tcos(u, v):
        return 1 - TF.cosine_similarity(u, v)

    check_op(lambda *t: F.triplet_margin_with_distance_loss(*t, distance_function=cos, **kw),
             lambda *t: TF.triplet_margin_with_distance_loss(*t, distance_function=tcos, **kw),
             a, p, n)


def test_integer_triplets_match_torch():
    a, p, n = (torch.randint(-5, 5, (4, 3)) for _ in range(3))
    ours = F.triplet_margin_loss(*(sf.tensor(t.numpy()) for t in (a, p, n)))
    ref = TF.triplet_margin_loss(a, p, n)
    assert str(ours.dtype) == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6)


def test_meta_shapes():
    m = {"device": "meta"}
    x, y = sf.zeros(4, 6, **m), sf.zeros(4, dtype=sf.int64, **m)
    assert F.multi_margin_loss(x, y, reduction="none").shape == (4,)
    out = F.multilabel_margin_loss(x, sf.zeros(4, 6, dtype=sf.int64, **m), reduction="none")
    assert out.shape == (4,) and out.dtype == sf.float32
    assert F.multilabel_soft_margin_loss(x, x).shape == ()
    assert F.hinge_embedding_loss(x, x, reduction="none").shape == (4, 6)
    assert F.triplet_margin_loss(x, x, x, reduction="none").shape == (4,)


def test_errors():
    x = sf.tensor(_x(3, 4), dtype=sf.float32)
    with pytest.raises(ShapeIndexError, match="out of range"):
        F.multi_margin_loss(x, sf.tensor([0, 1, 4]))
    with pytest.raises(ShapeRuntimeError, match="one class id per sample"):
        F.multi_margin_loss(x, sf.tensor([0, 1]))
    with pytest.raises(ShapeRuntimeError, match="p == 1 and p == 2"):
        F.multi_margin_loss(x, sf.tensor([0, 1, 2]), p=3)
    with pytest.raises(DTypeError):
        F.multi_margin_loss(x, sf.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(ShapeRuntimeError, match="input's shape"):
        F.multilabel_margin_loss(x, sf.tensor([0, 1, 2]))
    with pytest.raises(ShapeIndexError):
        F.multilabel_margin_loss(x, sf.full((3, 4), -2, dtype=sf.int64))
    with pytest.raises(ShapeError, match="greater than 0"):
        F.triplet_margin_loss(x, x, x, margin=-1.0)
    with pytest.raises(ShapeRuntimeError, match="same number of dims"):
        F.triplet_margin_with_distance_loss(x, x, x[0])
    with pytest.raises(ShapeError, match="reduction"):
        F.hinge_embedding_loss(x, x, reduction="abc")


@pytest.mark.parametrize("name,args,kw", [
    ("HingeEmbeddingLoss", ("x", "pm1"), {"margin": 0.5}),
    ("MultiMarginLoss", ("x", "ids"), {"p": 2, "margin": 0.7}),
    ("MultiLabelMarginLoss", ("x", "ids2"), {"reduction": "sum"}),
    ("MultiLabelSoftMarginLoss", ("x", "unit"), {"reduction": "none"}),
    ("TripletMarginLoss", ("x", "x2", "x3"), {"p": 1.0, "swap": True}),
    ("TripletMarginWithDistanceLoss", ("x", "x2", "x3"), {"margin": 0.5}),
])
def test_modules(name, args, kw):
    data = {"x": _x(4, 5), "x2": _x(4, 5), "x3": _x(4, 5), "pm1": _pm1(4, 5), "ids": _ids(5, 4),
            "ids2": _ids(5, 4, 5, low=-1), "unit": rng.random((4, 5))}
    ours = getattr(sf.nn, name)(**kw)(*(sf.tensor(data[a]) for a in args))
    ref = getattr(torch.nn, name)(**kw)(*(torch.tensor(data[a]) for a in args))
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-10)
