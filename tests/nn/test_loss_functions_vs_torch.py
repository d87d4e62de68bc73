"""Issue 17's losses and distances vs PyTorch: values and grads over reductions and options,
float64 gradcheck, meta shapes, and the errors a user sees."""

import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import shapeflow as sf
from shapeflow.errors import ShapeError, ShapeRuntimeError
from shapeflow.nn import functional as F
from tests.ops.harness import check_op

rng = np.random.default_rng(0)
REDUCTIONS = ["mean", "sum", "none"]


def normal(*shape):
    return rng.standard_normal(shape)


def signs(*shape):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1(reduction, beta):
    x, y = normal(4, 5), normal(4, 5)
    check_op(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
             lambda a, b: TF.smooth_l1_loss(a, b, reduction=reduction, beta=beta), x, y)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("delta", [1.0, 0.3, 2.5])
def test_huber(reduction, delta):
    x, y = 2 * normal(3, 6), normal(3, 6)
    check_op(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta),
             lambda a, b: TF.huber_loss(a, b, reduction=reduction, delta=delta), x, y)


def test_huber_weight():
    x, y, w = normal(3, 4), normal(3, 4), rng.random((3, 4))
    check_op(lambda a, b, c: F.huber_loss(a, b, delta=0.5, weight=c),
             lambda a, b, c: TF.huber_loss(a, b, delta=0.5, weight=c), x, y, w)


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    inp = np.log(rng.dirichlet(np.ones(5), size=4))
    tgt = rng.dirichlet(np.ones(5), size=4)
    tgt = np.log(tgt) if log_target else tgt
    with pytest.warns(UserWarning) if reduction == "mean" else _nothing():
        check_op(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
                 lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
                 inp, tgt)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_kl_div_zero_target_is_zero_not_nan():
    inp = sf.tensor([[-1.0, -2.0]])
    tgt = sf.tensor([[0.0, 1.0]])
    out = F.kl_div(inp, tgt, reduction="none")
    ref = TF.kl_div(torch.tensor([[-1.0, -2.0]]), torch.tensor([[0.0, 1.0]]), reduction="none")
    np.testing.assert_allclose(out.numpy(), ref.numpy())


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_margin_ranking(reduction, margin):
    check_op(lambda a, b, t: F.margin_ranking_loss(a, b, t.to(a.dtype), margin,
                                                   reduction=reduction),
             lambda a, b, t: TF.margin_ranking_loss(a, b, t.to(a.dtype), margin,
                                                    reduction=reduction),
             normal(7), normal(7), signs(7).astype(np.int64))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_soft_margin(reduction):
    # targets are ints made float inside: PyTorch's soft_margin_loss has no target grad
    check_op(lambda a, t: F.soft_margin_loss(a, t.to(a.dtype), reduction=reduction),
             lambda a, t: TF.soft_margin_loss(a, t.to(a.dtype), reduction=reduction),
             3 * normal(4, 3), signs(4, 3).astype(np.int64))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3, -0.2])
@pytest.mark.parametrize("shape", [(5, 4), (6,)])
def test_cosine_embedding(reduction, margin, shape):
    t = signs(*shape[:-1]) if len(shape) == 2 else np.array(-1.0 if margin < 0 else 1.0)
    check_op(lambda a, b, c: F.cosine_embedding_loss(a, b, c, margin, reduction=reduction),
             lambda a, b, c: TF.cosine_embedding_loss(a, b, c, margin, reduction=reduction),
             normal(*shape), normal(*shape), t.astype(np.int64))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("var_shape", [(4, 3), (4,), (4, 1)])
def test_gaussian_nll(reduction, full, var_shape):
    var = rng.random(var_shape) + 0.1
    check_op(lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=full, reduction=reduction),
             lambda a, b, v: TF.gaussian_nll_loss(a, b, v, full=full, reduction=reduction),
             normal(4, 3), normal(4, 3), var)


def test_gaussian_nll_clamps_var_value_not_grad():
    var = np.array([1e-9, 0.5, 2.0])
    check_op(lambda a, b, v: F.gaussian_nll_loss(a, b, v, eps=1e-3),
             lambda a, b, v: TF.gaussian_nll_loss(a, b, v, eps=1e-3),
             normal(3), normal(3), var, gradcheck=False, rtol=1e-4)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input", [True, False])
@pytest.mark.parametrize("full", [False, True])
def test_poisson_nll(reduction, log_input, full):
    x = normal(3, 4) if log_input else rng.random((3, 4)) + 0.2
    y = rng.integers(0, 5, (3, 4))  # counts, made float inside (no grad: Stirling's mask)
    check_op(lambda a, b: F.poisson_nll_loss(a, b.to(a.dtype), log_input, full,
                                             reduction=reduction),
             lambda a, b: TF.poisson_nll_loss(a, b.to(a.dtype), log_input, full,
                                              reduction=reduction), x, y)


@pytest.mark.parametrize("shapes,dim", [(((4, 5), (4, 5)), 1), (((2, 3, 4), (2, 3, 4)), -1),
                                        (((3, 4), (1, 4)), 1), (((6,), (6,)), 0),
                                        (((2, 3, 4), (3, 4)), 0)])
def test_cosine_similarity(shapes, dim):
    a, b = normal(*shapes[0]), normal(*shapes[1])
    check_op(lambda x, y: F.cosine_similarity(x, y, dim),
             lambda x, y: TF.cosine_similarity(x, y, dim), a, b)
    m = sf.nn.CosineSimilarity(dim)(sf.from_numpy(a), sf.from_numpy(b))
    r = tnn.CosineSimilarity(dim)(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(m.numpy(), r.numpy(), rtol=1e-12)


def test_cosine_similarity_zero_vector():
    a, b = np.zeros((2, 3)), normal(2, 3)
    check_op(F.cosine_similarity, TF.cosine_similarity, a, b, gradcheck=False)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((4, 5), (5,)), ((7,), (7,))])
def test_pairwise_distance(p, keepdim, shapes):
    a, b = normal(*shapes[0]), normal(*shapes[1])
    check_op(lambda x, y: F.pairwise_distance(x, y, p, 1e-6, keepdim),
             lambda x, y: TF.pairwise_distance(x, y, p, 1e-6, keepdim), a, b)
    m = sf.nn.PairwiseDistance(p, keepdim=keepdim)(sf.from_numpy(a), sf.from_numpy(b))
    r = tnn.PairwiseDistance(p, keepdim=keepdim)(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(m.numpy(), r.numpy(), rtol=1e-12)


# ---- modules: same values as PyTorch's modules, defaults and legacy arguments -------------

def _pair(*arrays):
    return ([sf.from_numpy(a.copy()) for a in arrays], [torch.from_numpy(a.copy()) for a in arrays])


@pytest.mark.parametrize("name,kwargs,make", [
    ("BCELoss", {}, lambda: (rng.random((3, 4)) * 0.9 + 0.05, rng.random((3, 4)))),
    ("BCELoss", {"reduction": "sum"}, lambda: (rng.random(5) * 0.9 + 0.05, rng.random(5))),
    ("KLDivLoss", {"reduction": "batchmean", "log_target": True},
     lambda: (np.log(rng.dirichlet(np.ones(3), 4)), np.log(rng.dirichlet(np.ones(3), 4)))),
    ("KLDivLoss", {"reduction": "sum"},
     lambda: (np.log(rng.dirichlet(np.ones(3), 4)), rng.dirichlet(np.ones(3), 4))),
    ("SmoothL1Loss", {"beta": 0.25}, lambda: (normal(3, 4), normal(3, 4))),
    ("SmoothL1Loss", {"size_average": False}, lambda: (normal(3, 4), normal(3, 4))),
    ("HuberLoss", {"delta": 2.0, "reduction": "none"}, lambda: (3 * normal(6), normal(6))),
    ("SoftMarginLoss", {}, lambda: (normal(5), signs(5))),
    ("MarginRankingLoss", {"margin": 0.2}, lambda: (normal(5), normal(5), signs(5))),
    ("CosineEmbeddingLoss", {"margin": 0.1}, lambda: (normal(4, 3), normal(4, 3), signs(4))),
    ("GaussianNLLLoss", {"full": True}, lambda: (normal(4, 2), normal(4, 2), rng.random(4) + .1)),
    ("PoissonNLLLoss", {"log_input": False, "full": True},
     lambda: (rng.random(6) + 0.1, rng.integers(0, 4, 6).astype(np.float64))),
])
def test_loss_modules_match_pytorch(name, kwargs, make):
    arrays = make()
    s_in, t_in = _pair(*arrays)
    s_in[0].requires_grad_(True)
    t_in[0].requires_grad_(True)
    out = getattr(sf.nn, name)(**kwargs)(*s_in)
    ref = getattr(tnn, name)(**kwargs)(*t_in)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(s_in[0].grad.numpy(), t_in[0].grad.numpy(), rtol=1e-8,
                               atol=1e-12)
    assert repr(getattr(sf.nn, name)(**kwargs)) == repr(getattr(tnn, name)(**kwargs))


def test_bce_loss_weight_is_a_buffer():
    w = rng.random((2, 3))
    x, y = rng.random((2, 3)) * 0.9 + 0.05, rng.random((2, 3))
    m, tm = sf.nn.BCELoss(weight=sf.from_numpy(w)), tnn.BCELoss(weight=torch.from_numpy(w))
    assert list(m.state_dict()) == list(tm.state_dict()) == ["weight"]
    np.testing.assert_allclose(m(sf.from_numpy(x), sf.from_numpy(y)).numpy(),
                               tm(torch.from_numpy(x), torch.from_numpy(y)).numpy(), rtol=1e-12)


def test_losses_on_meta():
    x = sf.randn(4, 3, device="meta", requires_grad=True)
    y = sf.randn(4, 3, device="meta")
    for out, shape in [(sf.nn.SmoothL1Loss()(x, y), ()),
                       (sf.nn.HuberLoss(reduction="none")(x, y), (4, 3)),
                       (sf.nn.KLDivLoss(reduction="batchmean")(x, y), ()),
                       (sf.nn.CosineEmbeddingLoss(reduction="none")(x, y,
                                                                    sf.ones(4, device="meta")),
                        (4,)),
                       (F.cosine_similarity(x, y), (4,)),
                       (F.pairwise_distance(x, y, keepdim=True), (4, 1)),
                       (sf.nn.GaussianNLLLoss(reduction="none")(x, y, sf.ones(4, device="meta")),
                        (4, 3))]:
        assert out.device == "meta" and out._data is None and tuple(out.shape) == shape
        assert out.requires_grad


# ---- errors -------------------------------------------------------------------------------

def test_shape_mismatch_names_op_and_operands():
    with pytest.raises(ShapeRuntimeError, match="smooth_l1_loss.*input.*target"):
        F.smooth_l1_loss(sf.randn(3, 4), sf.randn(4, 3))
    with pytest.raises(ShapeRuntimeError, match="margin_ranking_loss: input1 .*input2"):
        F.margin_ranking_loss(sf.randn(3), sf.randn(4), sf.ones(3))
    with pytest.raises(ShapeRuntimeError, match="cosine_embedding_loss: target"):
        F.cosine_embedding_loss(sf.randn(3, 2), sf.randn(3, 2), sf.ones(2))
    with pytest.raises(ShapeRuntimeError, match="gaussian_nll_loss: var"):
        F.gaussian_nll_loss(sf.randn(3, 2), sf.randn(3, 2), sf.ones(2, 3))


def test_bad_arguments():
    with pytest.raises(ShapeError, match="reduction"):
        F.kl_div(sf.randn(2), sf.rand(2), reduction="avg")
    with pytest.raises(ShapeError, match="reduction"):
        F.huber_loss(sf.randn(2), sf.randn(2), reduction="batchmean")
    with pytest.raises(ShapeError, match="beta"):
        F.smooth_l1_loss(sf.randn(2), sf.randn(2), beta=-1.0)
    with pytest.raises(ShapeError, match="negative"):
        F.gaussian_nll_loss(sf.randn(2), sf.randn(2), sf.tensor([1.0, -1.0]))
    with pytest.raises(ShapeError):
        sf.nn.KLDivLoss(reduction="avg")


def test_top_level_names_as_pytorch():
    a, b = normal(3, 4), normal(3, 4)
    np.testing.assert_allclose(sf.cosine_similarity(sf.from_numpy(a), sf.from_numpy(b)).numpy(),
                               torch.cosine_similarity(torch.from_numpy(a),
                                                       torch.from_numpy(b)).numpy())
    np.testing.assert_allclose(sf.pairwise_distance(sf.from_numpy(a), sf.from_numpy(b)).numpy(),
                               torch.pairwise_distance(torch.from_numpy(a),
                                                       torch.from_numpy(b)).numpy())


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), st.data())
@settings(max_examples=20, deadline=None)
def test_distances_and_losses_over_shapes_and_dims(shape, data):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    p = data.draw(st.sampled_from([1.0, 2.0, 3.0]))
    reduction = data.draw(st.sampled_from(REDUCTIONS))
    a, b = normal(*shape) + 0.1, normal(*shape)
    # away from zero: along a dim of size 1 the gradient is 0 up to rounding / |y|, which a
    # draw near 0 blows past any float32 tolerance in either framework
    far_a, far_b = (v + np.where(v >= 0, 0.5, -0.5) for v in (a, b))
    check_op(lambda x, y: F.cosine_similarity(x, y, dim),
             lambda x, y: TF.cosine_similarity(x, y, dim), far_a, far_b, gradcheck=False)
    check_op(lambda x, y: F.pairwise_distance(x, y, p),
             lambda x, y: TF.pairwise_distance(x, y, p), a, b, gradcheck=False)
    check_op(lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.5),
             lambda x, y: TF.smooth_l1_loss(x, y, reduction=reduction, beta=0.5), a, b,
             gradcheck=False)
    check_op(lambda x, y: F.kl_div(x, y, reduction="batchmean", log_target=True),
             lambda x, y: TF.kl_div(x, y, reduction="batchmean", log_target=True), a, b,
             gradcheck=False)
