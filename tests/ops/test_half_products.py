"""matmul, mm, bmm, addmm and linear on bfloat16/float16 tensors against PyTorch, forward
and backward: float32 accumulation, outputs and gradients in the operands' dtype."""

import ml_dtypes
import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn.functional as F

DTYPES = [(sf.bfloat16, torch.bfloat16), (sf.float16, torch.float16)]


def _pair(rng, shape, sdt, tdt, requires_grad=True):
    t = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(tdt)
    s = sf.from_numpy(t.float().numpy()).to(sdt)
    if requires_grad:
        t.requires_grad_(True)
        s.requires_grad_(True)
    return s, t


def _close(s, t, sdt, ulps=1, of_max=False):
    """s (shapeflow) within `ulps` of t (torch) in units of the dtype's spacing (at each
    value, or at the largest with of_max: for sums whose terms are far larger)."""
    assert s.dtype is sdt
    got = s.detach().float().numpy().astype(np.float64)
    ref = t.detach().float().numpy().astype(np.float64)
    assert got.shape == ref.shape
    eps = float(ml_dtypes.finfo(sdt.np).eps)
    scale = np.maximum(np.abs(ref), np.abs(ref).max() * (1.0 if of_max else 2.0**-8))
    assert (np.abs(got - ref) <= ulps * eps * scale).all(), np.abs(got - ref).max()


@pytest.mark.parametrize("sdt,tdt", DTYPES)
@pytest.mark.parametrize("sa,sb", [((64, 48), (48, 40)), ((33, 257), (257, 65)),
                                   ((7, 13), (13, 5)), ((4, 24, 40), (4, 40, 19)),
                                   ((2, 3, 16, 31), (3, 31, 8)), ((40,), (40, 30)),
                                   ((5, 40, 30), (30,))])
def test_matmul_forward_backward(sdt, tdt, sa, sb, rng):
    a, ta = _pair(rng, sa, sdt, tdt)
    b, tb = _pair(rng, sb, sdt, tdt)
    out, tout = a @ b, ta @ tb
    _close(out, tout, sdt)
    g, tg = _pair(rng, tuple(tout.shape), sdt, tdt, requires_grad=False)
    out.backward(g)
    tout.backward(tg)
    _close(a.grad, ta.grad, sdt)
    _close(b.grad, tb.grad, sdt)


@pytest.mark.parametrize("sdt,tdt", DTYPES)
def test_transposed_and_strided_operands(sdt, tdt, rng):
    a, ta = _pair(rng, (50, 70), sdt, tdt)
    b, tb = _pair(rng, (90, 50), sdt, tdt)
    out = a.T @ b[::2].T
    tout = ta.T @ tb[::2].T
    _close(out, tout, sdt)
    out.sum().backward()
    tout.sum().backward()
    _close(a.grad, ta.grad, sdt)
    _close(b.grad, tb.grad, sdt)


@pytest.mark.parametrize("sdt,tdt", DTYPES)
def test_bmm_and_mm_and_addmm(sdt, tdt, rng):
    a, ta = _pair(rng, (6, 20, 35), sdt, tdt)
    b, tb = _pair(rng, (6, 35, 12), sdt, tdt)
    _close(sf.bmm(a, b), torch.bmm(ta, tb), sdt)
    c, tc = _pair(rng, (40, 35), sdt, tdt)
    d, td = _pair(rng, (35, 50), sdt, tdt)
    _close(sf.mm(c, d), torch.mm(tc, td), sdt)
    bias, tbias = _pair(rng, (50,), sdt, tdt)
    # addmm is bias + the rounded product here (PyTorch fuses): within one more rounding
    _close(sf.addmm(bias, c, d), torch.addmm(tbias, tc, td), sdt, ulps=2)


@pytest.mark.parametrize("sdt,tdt", DTYPES)
@pytest.mark.parametrize("lead,fin,fout", [((1024,), 256, 1024), ((4, 37), 61, 19),
                                           ((3,), 16, 8), ((2, 3, 5), 40, 33)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_backward(sdt, tdt, lead, fin, fout, bias, rng):
    x, tx = _pair(rng, lead + (fin,), sdt, tdt)
    w, tw = _pair(rng, (fout, fin), sdt, tdt)
    b, tb = _pair(rng, (fout,), sdt, tdt) if bias else (None, None)
    out, tout = F.linear(x, w, b), torch.nn.functional.linear(tx, tw, tb)
    _close(out, tout, sdt)
    g, tg = _pair(rng, tuple(tout.shape), sdt, tdt, requires_grad=False)
    out.backward(g)
    tout.backward(tg)
    _close(x.grad, tx.grad, sdt)
    _close(w.grad, tw.grad, sdt)
    if bias:
        _close(b.grad, tb.grad, sdt)


def test_linear_module_in_bf16(rng):
    layer = sf.nn.Linear(48, 24).to(sf.bfloat16)
    ref = torch.nn.Linear(48, 24).to(torch.bfloat16)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(layer.weight.detach().float().numpy()))
        ref.bias.copy_(torch.from_numpy(layer.bias.detach().float().numpy()))
    x, tx = _pair(rng, (10, 48), sf.bfloat16, torch.bfloat16)
    y, ty = layer(x), ref(tx)
    _close(y, ty, sf.bfloat16)
    assert y._data.dtype == sf.bfloat16.np  # the array, not only the declared dtype
    y.float().pow(2).sum().backward()
    ty.float().pow(2).sum().backward()
    _close(layer.weight.grad, ref.weight.grad, sf.bfloat16)
    _close(layer.bias.grad, ref.bias.grad, sf.bfloat16)


@pytest.mark.parametrize("sdt,tdt", DTYPES)
def test_products_keep_the_array_dtype(sdt, tdt, rng):
    a, _ = _pair(rng, (3, 8, 9), sdt, tdt, requires_grad=False)
    b, _ = _pair(rng, (9, 4), sdt, tdt, requires_grad=False)
    for out in (a @ b, a[0] @ b, sf.einsum("bij,jk->bik", a, b)):
        assert out.dtype is sdt and out._data.dtype == sdt.np


@pytest.mark.parametrize("sdt,tdt", DTYPES)
def test_conv2d_products_in_16_bit(sdt, tdt, rng):
    x, tx = _pair(rng, (2, 3, 12, 12), sdt, tdt)
    w, tw = _pair(rng, (8, 3, 3, 3), sdt, tdt)
    out = F.conv2d(x, w, padding=1)
    tout = torch.nn.functional.conv2d(tx, tw, padding=1)
    assert out._data.dtype == sdt.np
    _close(out, tout, sdt)
    out.float().sum().backward()
    tout.float().sum().backward()
    _close(w.grad, tw.grad, sdt)
    # PyTorch's float16 input gradient rounds an intermediate (further from the float64
    # result than ours, which rounds once): two units apart at most
    _close(x.grad, tx.grad, sdt, ulps=2, of_max=True)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_in_bf16_within_bf16_tolerance(causal, rng):
    q, tq = _pair(rng, (2, 4, 16, 32), sf.bfloat16, torch.bfloat16)
    k, tk = _pair(rng, (2, 4, 16, 32), sf.bfloat16, torch.bfloat16)
    v, tv = _pair(rng, (2, 4, 16, 32), sf.bfloat16, torch.bfloat16)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    assert out.dtype is sf.bfloat16 and out._data.dtype == sf.bfloat16.np
    # the scores are rounded to bf16 before the softmax here (PyTorch's CPU kernel keeps
    # them in float32): a few units in the last place of the output's scale
    _close(out, tout, sf.bfloat16, ulps=1, of_max=True)
    out.float().sum().backward()
    tout.float().sum().backward()
    _close(q.grad, tq.grad, sf.bfloat16, ulps=2, of_max=True)
