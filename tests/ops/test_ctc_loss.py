"""ctc_loss and nn.CTCLoss against PyTorch: padded and concatenated targets, lengths as lists
or tensors, every reduction, zero_infinity, unbatched input; PyTorch's gradient, finite
differences through log_softmax, meta shapes and errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.errors import DTypeError, ShapeError, ShapeRuntimeError
from tests.ops.harness import assert_saved_matches_declared


def _case(T, N, C, S, seed, short=False, concat=False, blank=0):
    g = torch.Generator().manual_seed(seed)
    lp = torch.randn(T, N, C, dtype=torch.float64, generator=g).log_softmax(2)
    tg = torch.randint(0, C - 1, (N, S), generator=g)
    tg = tg + (tg >= blank).long()  # every id but blank
    il = torch.randint(1, T + 1, (N,), generator=g) if short else torch.full((N,), T)
    tl = torch.randint(0 if short else S // 3, S + 1, (N,), generator=g)
    if concat:
        tg = torch.cat([tg[i, :tl[i]] for i in range(N)])
    return lp, tg, il, tl


def _sf(x):
    return sf.tensor(x.detach().numpy()) if isinstance(x, torch.Tensor) else x


def _compare(lp, tg, il, tl, lengths_as=list, **kw):
    lp = lp.clone().requires_grad_()
    il, tl = (il.tolist(), tl.tolist()) if lengths_as is list else (il, tl)
    ref = TF.ctc_loss(lp, tg, il, tl, **kw)
    slp = _sf(lp).requires_grad_()
    ours = F.ctc_loss(slp, _sf(tg), _sf(il), _sf(tl), **kw)
    assert tuple(ours.shape) == tuple(ref.shape) and ours.dtype == sf.float64
    np.testing.assert_allclose(ours.detach().numpy(), ref.detach().numpy(), rtol=1e-10)
    cot = np.random.default_rng(0).standard_normal(tuple(ref.shape))
    (grad,) = torch.autograd.grad((ref * torch.tensor(cot)).sum(), lp)
    (ours * sf.tensor(cot)).sum().backward()
    np.testing.assert_allclose(slp.grad.numpy(), grad.numpy(), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("reduction,zero_infinity,lengths_as", list(itertools.product(
    ["none", "mean", "sum"], [False, True], [list, torch.Tensor])))
def test_matches_torch_opinfo_sizes(reduction, zero_infinity, lengths_as):
    _compare(*_case(50, 16, 20, 30, seed=1), lengths_as=lengths_as, reduction=reduction,
             zero_infinity=zero_infinity)


@pytest.mark.parametrize("short,concat,blank,reduction", [
    (True, False, 0, "none"), (True, True, 0, "mean"), (False, True, 3, "sum"),
    (True, False, 4, "mean")])
def test_variable_lengths_concatenated_and_blank(short, concat, blank, reduction):
    _compare(*_case(12, 5, 6, 4, seed=2, short=short, concat=concat, blank=blank),
             blank=blank, reduction=reduction, zero_infinity=True)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_target(zero_infinity):
    """Too few frames for the labels (repeats need a blank between): inf, or 0 with a zero
    gradient under zero_infinity; PyTorch's NaN gradient otherwise."""
    lp = torch.randn(3, 2, 5, dtype=torch.float64).log_softmax(2)
    tg = torch.tensor([[1, 2, 3, 4], [1, 1, 0, 0]])
    _compare(lp, tg, torch.tensor([3, 3]), torch.tensor([4, 2]), reduction="none",
             zero_infinity=zero_infinity)


def test_unbatched():
    lp = torch.randn(6, 5, dtype=torch.float64).log_softmax(1)
    ref = TF.ctc_loss(lp, torch.tensor([1, 2, 2]), torch.tensor(6), torch.tensor(3),
                      reduction="none")
    ours = F.ctc_loss(_sf(lp), sf.tensor([1, 2, 2]), sf.tensor(6), sf.tensor(3),
                      reduction="none")
    assert ours.shape == () and np.isclose(float(ours), float(ref))
    assert sf.ctc_loss is F.ctc_loss


def test_finite_differences_through_log_softmax():
    """PyTorch's ctc gradient is the logits' gradient when log_probs = log_softmax(logits):
    finite differences check the composition."""
    _, tg, il, tl = _case(7, 3, 5, 3, seed=3, short=True)
    x = sf.tensor(np.random.default_rng(0).standard_normal((7, 3, 5))).requires_grad_()
    assert sf.autograd.gradcheck(
        lambda z: F.ctc_loss(F.log_softmax(z, 2), _sf(tg), il.tolist(), tl.tolist(),
                             reduction="sum"), [x])


def test_module_meta_and_saved():
    lp, tg, il, tl = _case(9, 4, 6, 3, seed=4)
    ours = sf.nn.CTCLoss(blank=0, reduction="mean")(_sf(lp), _sf(tg), _sf(il), _sf(tl))
    ref = torch.nn.CTCLoss(blank=0, reduction="mean")(lp, tg, il, tl)
    assert np.isclose(float(ours), float(ref))
    m = {"device": "meta"}
    out = F.ctc_loss(sf.zeros(50, 16, 20, **m), sf.zeros(16, 30, dtype=sf.int64, **m),
                     sf.zeros(16, dtype=sf.int64, **m), sf.zeros(16, dtype=sf.int64, **m),
                     reduction="none")
    assert out.shape == (16,) and out.dtype == sf.float32 and out.device == "meta"
    x = _sf(lp).requires_grad_()
    loss = F.ctc_loss(x, _sf(tg), il.tolist(), tl.tolist(), reduction="none")
    assert_saved_matches_declared(loss)  # log_probs and the [T, N, 2S + 1] log alphas


def test_errors():
    lp = sf.zeros(5, 2, 4)
    tg = sf.tensor([[1, 2], [3, 1]])
    with pytest.raises(DTypeError):
        F.ctc_loss(lp, tg.float(), [5, 5], [2, 2])
    with pytest.raises(ShapeRuntimeError, match="input_lengths"):
        F.ctc_loss(lp, tg, [6, 5], [2, 2])
    with pytest.raises(ShapeRuntimeError, match="one length per sample"):
        F.ctc_loss(lp, tg, [5], [2, 2])
    with pytest.raises(ShapeRuntimeError, match="exceed"):
        F.ctc_loss(lp, tg, [5, 5], [3, 2])
    with pytest.raises(ShapeRuntimeError, match="other than blank"):
        F.ctc_loss(lp, sf.tensor([[0, 2], [3, 1]]), [5, 5], [2, 2])
    with pytest.raises(ShapeError, match="blank"):
        F.ctc_loss(lp, tg, [5, 5], [2, 2], blank=4)
    with pytest.raises(ShapeRuntimeError, match=r"\[T, N, C\]"):
        F.ctc_loss(sf.zeros(5), tg, [5, 5], [2, 2])
