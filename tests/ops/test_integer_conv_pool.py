"""Integer convolutions, average pools, linear and poisson_nll_loss: exact, as PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.errors import DTypeError

BIG = 2 ** 46  # sums reach 2^59: float64 would round them, int64 must not


def _pair(a: np.ndarray):
    return sf.from_numpy(a.copy()), torch.from_numpy(a.copy())


def _same(ours: sf.Tensor, ref: torch.Tensor) -> None:
    assert str(ours.dtype) == str(ref.dtype).removeprefix("torch."), (ours.dtype, ref.dtype)
    assert tuple(ours.shape) == tuple(ref.shape)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def _ints(shape, dtype="int64", big=False, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-9, 10, shape).astype(dtype)
    if big:
        a = a * BIG + rng.integers(-5, 6, shape)
    return a


CONVS = [  # (dims, kwargs)
    (1, {}), (1, {"stride": 2, "padding": 1, "dilation": 2}), (1, {"groups": 2}),
    (2, {}), (2, {"stride": (2, 1), "padding": 1}), (2, {"groups": 2, "dilation": 2}),
    (3, {}), (3, {"stride": 2, "padding": (1, 0, 1)}),
]


@pytest.mark.parametrize("nd,kw", CONVS)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_int64_exact(nd, kw, bias):
    x = _ints((2, 4) + (7,) * nd, big=True)
    w = _ints((6, 4 // kw.get("groups", 1)) + (3,) * nd, seed=1)
    b = _ints((6,), big=True, seed=2) if bias else None
    fs, ft = getattr(F, f"conv{nd}d"), getattr(TF, f"conv{nd}d")
    (xs, xt), (ws, wt) = _pair(x), _pair(w)
    bs, bt = _pair(b) if bias else (None, None)
    _same(fs(xs, ws, bs, **kw), ft(xt, wt, bt, **kw))


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "uint8"])
def test_conv2d_narrow_ints_wrap_as_torch(dtype):
    x, w = _ints((1, 3, 6, 6), "int64", seed=3), _ints((4, 3, 3, 3), "int64", seed=4)
    x, w = np.abs(x).astype(dtype) * 9, np.abs(w).astype(dtype) * 7  # sums overflow 8 bits
    (xs, xt), (ws, wt) = _pair(x), _pair(w)
    _same(F.conv2d(xs, ws, padding=1), TF.conv2d(xt, wt, padding=1))


TRANSPOSED = [
    (1, {}), (1, {"stride": 3, "padding": 1, "output_padding": 2}), (1, {"groups": 2}),
    (2, {}), (2, {"stride": 2, "padding": 1, "output_padding": 1, "dilation": 2}),
    (2, {"groups": 2, "stride": (1, 2)}), (3, {}), (3, {"stride": 2, "output_padding": 1}),
]


@pytest.mark.parametrize("nd,kw", TRANSPOSED)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose_int64_exact(nd, kw, bias):
    g = kw.get("groups", 1)
    x = _ints((2, 4) + (5,) * nd, big=True)
    w = _ints((4, 6 // g) + (3,) * nd, seed=1)
    b = _ints((6,), big=True, seed=2) if bias else None
    fs, ft = getattr(F, f"conv_transpose{nd}d"), getattr(TF, f"conv_transpose{nd}d")
    (xs, xt), (ws, wt) = _pair(x), _pair(w)
    bs, bt = _pair(b) if bias else (None, None)
    _same(fs(xs, ws, bs, **kw), ft(xt, wt, bt, **kw))


POOLS = [
    {}, {"stride": 1}, {"padding": 1}, {"padding": 1, "count_include_pad": False},
    {"stride": 2, "ceil_mode": True}, {"stride": 2, "padding": 1, "ceil_mode": True,
                                        "count_include_pad": False},
]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", POOLS)
def test_avg_pool_int64_truncates_as_torch(nd, kw):
    x = _ints((2, 3) + (7,) * nd, big=True)  # negative sums too: division toward zero
    xs, xt = _pair(x)
    fs, ft = getattr(F, f"avg_pool{nd}d"), getattr(TF, f"avg_pool{nd}d")
    _same(fs(xs, 3, **kw), ft(xt, 3, **kw))


@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.parametrize("div", [3, -4])
def test_avg_pool_int64_divisor_override(nd, div):
    xs, xt = _pair(_ints((1, 2) + (6,) * nd, big=True))
    fs, ft = getattr(F, f"avg_pool{nd}d"), getattr(TF, f"avg_pool{nd}d")
    _same(fs(xs, 2, padding=1, divisor_override=div), ft(xt, 2, padding=1,
                                                           divisor_override=div))


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_int_exact(dtype, bias):
    big = dtype == "int64"
    x, w = _ints((2, 3, 5), dtype, big=big), _ints((4, 5), dtype, seed=1)
    (xs, xt), (ws, wt) = _pair(x), _pair(w)
    bs, bt = _pair(_ints((4,), dtype, big=big, seed=2)) if bias else (None, None)
    _same(F.linear(xs, ws, bs), TF.linear(xt, wt, bt))


@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("int32", "float64"),
                                    ("float32", "int64")])
@pytest.mark.parametrize("log_input,full", [(True, False), (False, True), (True, True)])
def test_poisson_nll_loss_integer_inputs(dtypes, log_input, full):
    rng = np.random.default_rng(5)
    x = rng.integers(1, 6, (3, 4)).astype(dtypes[0])
    t = rng.integers(0, 6, (3, 4)).astype(dtypes[1])
    (xs, xt), (ts, tt) = _pair(x), _pair(t)
    ours = F.poisson_nll_loss(xs, ts, log_input=log_input, full=full, reduction="none")
    ref = TF.poisson_nll_loss(xt, tt, log_input=log_input, full=full, reduction="none")
    assert str(ours.dtype) == str(ref.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-6)


def test_integer_refusals_match_torch():
    x, w = sf.ones((1, 2, 4, 4), dtype=sf.int32), sf.ones((2, 3, 2, 2), dtype=sf.int32)
    with pytest.raises(DTypeError):  # torch's transposed conv takes int64 only
        F.conv_transpose2d(x, w)
    with pytest.raises(DTypeError):
        F.avg_pool2d(x, 2)
    b = sf.ones((1, 2, 4, 4), dtype=sf.bool)
    with pytest.raises(DTypeError):
        F.conv2d(b, sf.ones((3, 2, 2, 2), dtype=sf.bool))
    with pytest.raises(DTypeError):  # integer x with a float weight: a token id by mistake
        F.linear(sf.ones((2, 3), dtype=sf.int64), sf.ones((4, 3)))
    with pytest.raises(DTypeError):
        F.linear(sf.ones((2, 3), dtype=sf.uint16), sf.ones((4, 3), dtype=sf.uint16))


def test_integer_ops_on_meta():
    x = sf.zeros((2, 4, 6, 6), dtype=sf.int64, device="meta")
    w = sf.zeros((4, 4, 3, 3), dtype=sf.int64, device="meta")
    for out, shape in ((F.conv2d(x, w, padding=1), (2, 4, 6, 6)),
                       (F.conv_transpose2d(x, w, stride=2), (2, 4, 13, 13)),
                       (F.avg_pool2d(x, 2), (2, 4, 3, 3)),
                       (F.avg_pool3d(x, 2), (2, 2, 3, 3)),
                       (F.linear(x, sf.zeros((2, 6), dtype=sf.int64, device="meta")),
                        (2, 4, 6, 2))):
        assert out.device == "meta" and out.dtype is sf.int64 and tuple(out.shape) == shape
