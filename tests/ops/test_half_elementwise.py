"""Elementwise ops and reductions on bfloat16/float16 tensors give PyTorch's values: float32
inside, one rounding (sums accumulate in float32), numbers mixed in as PyTorch does."""

import ml_dtypes
import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn.functional as F

DTYPES = [(sf.bfloat16, torch.bfloat16), (sf.float16, torch.float16)]


def _pair(seed, shape, sdt, tdt, positive=False, scale=1.0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * scale
    if positive:
        a = np.abs(a) + 0.1
    t = torch.from_numpy(a).to(tdt)
    return sf.from_numpy(t.float().numpy()).to(sdt), t


def _values(s, t, sdt):
    assert s.dtype is sdt and s._data.dtype == sdt.np  # the array too, not only the label
    return s.float().numpy().astype(np.float64), t.float().numpy().astype(np.float64)


X, Y, P, BIG = (64, 300), (64, 300), (64, 300), (100_000,)
# name -> (shapeflow fn, torch fn) of x, y (normal), p (positive), big (positive, long)
EXACT = {
    "add": (lambda x, y, p, b: x + y, lambda x, y, p, b: x + y),
    "sub": (lambda x, y, p, b: x - y, lambda x, y, p, b: x - y),
    "mul": (lambda x, y, p, b: x * y, lambda x, y, p, b: x * y),
    "div": (lambda x, y, p, b: x / p, lambda x, y, p, b: x / p),
    "add_number": (lambda x, y, p, b: x + 0.1, lambda x, y, p, b: x + 0.1),
    "rsub_number": (lambda x, y, p, b: 1.7 - x, lambda x, y, p, b: 1.7 - x),
    "mul_number": (lambda x, y, p, b: x * 0.3, lambda x, y, p, b: x * 0.3),
    "div_number": (lambda x, y, p, b: x / 0.3, lambda x, y, p, b: x / 0.3),
    "rdiv_number": (lambda x, y, p, b: 0.3 / p, lambda x, y, p, b: 0.3 / p),
    "pow2": (lambda x, y, p, b: x**2, lambda x, y, p, b: x**2),
    "pow3": (lambda x, y, p, b: x**3, lambda x, y, p, b: x**3),
    "pow_m2": (lambda x, y, p, b: p**-2, lambda x, y, p, b: p**-2),
    "pow_1.5": (lambda x, y, p, b: p**1.5, lambda x, y, p, b: p**1.5),
    "rpow": (lambda x, y, p, b: 1.7**x, lambda x, y, p, b: 1.7**x),
    "exp": (lambda x, y, p, b: x.exp(), lambda x, y, p, b: x.exp()),
    "log": (lambda x, y, p, b: p.log(), lambda x, y, p, b: p.log()),
    "sqrt": (lambda x, y, p, b: p.sqrt(), lambda x, y, p, b: p.sqrt()),
    "rsqrt": (lambda x, y, p, b: p.rsqrt(), lambda x, y, p, b: p.rsqrt()),
    "tanh": (lambda x, y, p, b: x.tanh(), lambda x, y, p, b: x.tanh()),
    "sin": (lambda x, y, p, b: x.sin(), lambda x, y, p, b: x.sin()),
    "sigmoid": (lambda x, y, p, b: x.sigmoid(), lambda x, y, p, b: x.sigmoid()),
    "silu": (lambda x, y, p, b: F.silu(x), lambda x, y, p, b: torch.nn.functional.silu(x)),
    "relu": (lambda x, y, p, b: x.relu(), lambda x, y, p, b: x.relu()),
    "abs": (lambda x, y, p, b: x.abs(), lambda x, y, p, b: x.abs()),
    "clamp": (lambda x, y, p, b: x.clamp(min=0.3), lambda x, y, p, b: x.clamp(min=0.3)),
    "sum": (lambda x, y, p, b: b.sum(), lambda x, y, p, b: b.sum()),
    "sum_rows": (lambda x, y, p, b: x.sum(1), lambda x, y, p, b: x.sum(1)),
    "sum_cols": (lambda x, y, p, b: x.sum(0), lambda x, y, p, b: x.sum(0)),
    "mean": (lambda x, y, p, b: b.mean(), lambda x, y, p, b: b.mean()),
    "mean_rows": (lambda x, y, p, b: x.mean(1), lambda x, y, p, b: x.mean(1)),
    "cumsum": (lambda x, y, p, b: b.cumsum(0), lambda x, y, p, b: b.cumsum(0)),
    "var": (lambda x, y, p, b: x.var(1), lambda x, y, p, b: x.var(1)),
    "max": (lambda x, y, p, b: x.amax(1), lambda x, y, p, b: x.amax(1)),
    "softmax": (lambda x, y, p, b: x.softmax(1), lambda x, y, p, b: x.softmax(1)),
    "layer_norm": (lambda x, y, p, b: F.layer_norm(x, (300,)),
                   lambda x, y, p, b: torch.nn.functional.layer_norm(x, (300,))),
}
# PyTorch rounds some intermediates of these (logsumexp) or approximates differently
# (GELU's erf, log_softmax's last step): within one unit in the last place
CLOSE = {
    "gelu": (lambda x, y, p, b: F.gelu(x), lambda x, y, p, b: torch.nn.functional.gelu(x)),
    "log_softmax": (lambda x, y, p, b: x.log_softmax(1), lambda x, y, p, b: x.log_softmax(1)),
    "logsumexp": (lambda x, y, p, b: x.logsumexp(1), lambda x, y, p, b: x.logsumexp(1)),
    "floor_divide": (lambda x, y, p, b: x // 0.3, lambda x, y, p, b: x // 0.3),
}


def _operands(sdt, tdt):
    return list(zip(_pair(1, X, sdt, tdt), _pair(2, Y, sdt, tdt),
                    _pair(3, P, sdt, tdt, positive=True), _pair(4, BIG, sdt, tdt, True)))


def _ulp_errors(got, ref, sdt):
    finite = np.isfinite(ref)
    assert (np.isfinite(got) == finite).all()
    eps = float(ml_dtypes.finfo(sdt.np).eps)
    spacing = eps * np.maximum(np.abs(ref[finite]), float(ml_dtypes.finfo(sdt.np).tiny))
    return np.abs(got - ref)[finite] / spacing


@pytest.mark.parametrize("sdt,tdt", DTYPES)
@pytest.mark.parametrize("name", sorted(EXACT))
def test_bit_for_bit_with_torch_but_rare_ties(name, sdt, tdt):
    s_ops, t_ops = _operands(sdt, tdt)
    fs, ft = EXACT[name]
    got, ref = _values(fs(*s_ops), ft(*t_ops), sdt)
    # float32 sums in another order can land on the other side of a rounding boundary
    assert _ulp_errors(got, ref, sdt).max(initial=0) <= 1
    assert (got != ref).sum() <= max(1, got.size // 2000)


@pytest.mark.parametrize("sdt,tdt", DTYPES)
@pytest.mark.parametrize("name", sorted(CLOSE))
def test_within_one_ulp_of_torch(name, sdt, tdt):
    s_ops, t_ops = _operands(sdt, tdt)
    fs, ft = CLOSE[name]
    got, ref = _values(fs(*s_ops), ft(*t_ops), sdt)
    if name == "floor_divide":  # a quotient on a step boundary is off by one step: rare
        assert (got != ref).mean() < 0.01 and np.abs(got - ref).max() <= 1
        return
    assert _ulp_errors(got, ref, sdt).max(initial=0) <= 2
    assert (got != ref).mean() < 0.5  # logsumexp: PyTorch rounds each of its steps


@pytest.mark.parametrize("sdt,tdt", DTYPES)
def test_bf16_sum_of_many_ones_is_exact(sdt, tdt):
    # summed in the 16-bit type, 40,000 ones stop growing at 256 (bf16) or 2048 (fp16)
    x = sf.ones(40_000, dtype=sdt)
    assert float(x.sum()) == float(torch.ones(40_000, dtype=tdt).sum())
    assert float(x.cumsum(0)[-1]) == float(torch.ones(40_000, dtype=tdt).cumsum(0)[-1])
