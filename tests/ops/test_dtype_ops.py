"""view(dtype), arange/linspace checks, uint16/32/64, integer max_pool2d, negative pads in
every F.pad mode and grouped-query attention, each against PyTorch."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from tests.ops.harness import TORCH_DTYPES, check_op

rng = np.random.default_rng(11)


def _torch_dtype(dt):
    return TORCH_DTYPES[dt]


# ---- view(dtype) ---------------------------------------------------------------------------

VIEW_CASES = [
    (sf.float32, sf.int32, (2, 4)), (sf.float32, sf.int16, (2, 3)),
    (sf.float32, sf.float64, (2, 4)),
    (sf.int64, sf.uint8, (3,)), (sf.int8, sf.int32, (2, 8)), (sf.float16, sf.bfloat16, (5,)),
    (sf.float32, sf.uint32, (1, 1)), (sf.bool, sf.uint8, (4,)),
]


@pytest.mark.parametrize("src,dst,shape", VIEW_CASES, ids=str)
def test_view_dtype_reinterprets_bytes(src, dst, shape):
    a = (rng.standard_normal(shape) * 50).astype(src.np) if src is not sf.bool else \
        rng.random(shape) > 0.5
    s = sf.from_numpy(a.copy()).view(dst)
    t = torch.from_numpy(a.copy()).view(_torch_dtype(dst)) if src is not sf.float16 or \
        dst is not sf.bfloat16 else torch.from_numpy(a.copy()).view(torch.bfloat16)
    assert s.dtype is dst and tuple(s.shape) == tuple(t.shape)
    np.testing.assert_array_equal(s.numpy().view(np.uint8), t.view(torch.uint8).numpy())
    m = sf.from_numpy(a.copy()).to("meta").view(dst)
    assert m.device == "meta" and tuple(m.shape) == tuple(t.shape)


def test_view_dtype_shares_memory():
    x = sf.ones(2, 4)
    y = x.view(sf.int32)
    y[0, 0] = 0
    assert x[0, 0].item() == 0.0 and x._version is y._version


@pytest.mark.parametrize("fn", [lambda L: L.ones(2, 4).T.view(L.int8),
                                lambda L: L.ones(()).view(L.int16),
                                lambda L: L.ones(2, 3).view(L.float64),
                                lambda L: L.ones(2, 4)[:, ::2].view(L.float64)])
def test_view_dtype_errors_as_pytorch(fn):
    with pytest.raises(RuntimeError):
        fn(torch)
    with pytest.raises(RuntimeError) as e:
        fn(sf)
    assert isinstance(e.value, sf.ShapeflowError)


# ---- arange / linspace ---------------------------------------------------------------------

BAD_RANGES = [
    lambda L: L.arange(0, 10, -1), lambda L: L.arange(10, 0, 1), lambda L: L.arange(0, 1, 0),
    lambda L: L.arange(0, float("inf")), lambda L: L.linspace(0, 1, -1),
]


@pytest.mark.parametrize("i", range(len(BAD_RANGES)))
def test_bad_ranges_raise_as_pytorch(i):
    with pytest.raises(RuntimeError):
        BAD_RANGES[i](torch)
    with pytest.raises(RuntimeError) as e:
        BAD_RANGES[i](sf)
    assert isinstance(e.value, sf.ShapeflowError)


def test_linspace_bool_raises_as_pytorch():
    with pytest.raises(NotImplementedError):
        torch.linspace(0, 1, 5, dtype=torch.bool)
    with pytest.raises(NotImplementedError):
        sf.linspace(0, 1, 5, dtype=sf.bool)


def test_arange_overflow_is_reported_without_allocating():
    for device in ("cpu", "meta"):
        with pytest.raises(RuntimeError, match="overflow int32"):
            sf.arange(2 ** 33, dtype=sf.int32, device=device)


@pytest.mark.parametrize("args,kw", [((10,), {}), ((10, 0, -3), {}), ((0.5, 3), {}),
                                     ((-5, 5, 3), {"dtype": "int8"}), ((0, 0), {}),
                                     ((1, 2.5, 0.5), {"dtype": "float64"})])
def test_arange_values(args, kw):
    tkw = {"dtype": getattr(torch, kw["dtype"])} if kw else {}
    s, t = sf.arange(*args, **kw), torch.arange(*args, **tkw)
    assert _torch_dtype(s.dtype) == t.dtype
    np.testing.assert_array_equal(s.numpy(), t.numpy())


@pytest.mark.parametrize("args", [(0, 10, 5), (-1, 10, 4), (3, -3, 7)])
def test_linspace_integer_values(args):
    s, t = sf.linspace(*args, dtype=sf.int64), torch.linspace(*args, dtype=torch.int64)
    np.testing.assert_array_equal(s.numpy(), t.numpy())


# ---- uint16 / uint32 / uint64 --------------------------------------------------------------

UINTS = [sf.uint16, sf.uint32, sf.uint64]
OTHERS = [sf.bool, sf.uint8, sf.int8, sf.int16, sf.int32, sf.int64, sf.float16, sf.bfloat16,
          sf.float32, sf.float64, *UINTS]


@pytest.mark.parametrize("u", UINTS, ids=str)
@pytest.mark.parametrize("other", OTHERS, ids=str)
def test_limited_uint_promotion_as_pytorch(u, other):
    tu, to = _torch_dtype(u), _torch_dtype(other)
    try:
        want = torch.promote_types(tu, to)
    except RuntimeError:
        with pytest.raises(RuntimeError) as e:
            sf.promote_types(u, other)
        assert isinstance(e.value, sf.DTypeError)
        with pytest.raises(RuntimeError):
            sf.ones(2, dtype=u) * sf.ones(2, dtype=other)
        return
    assert _torch_dtype(sf.promote_types(u, other)) == want
    assert _torch_dtype(sf.promote_types(other, u)) == want


@pytest.mark.parametrize("u", UINTS, ids=str)
def test_limited_uints_round_trip_and_scalars(u):
    big = np.array([0, 1, np.iinfo(u.np).max], dtype=u.np)
    x = sf.from_numpy(big.copy())
    t = torch.from_numpy(big.copy())
    assert x.dtype is u and x.numpy().tolist() == t.tolist()
    assert (x * 2).dtype is u and _torch_dtype((x * 2).dtype) == (t * 2).dtype
    assert (x + 1.5).dtype is sf.float32 and (t + 1.5).dtype == torch.float32
    assert (x & 1).numpy().tolist() == (t & 1).tolist()
    assert sf.tensor([1, 2], dtype=u).to(sf.float32).tolist() == [1.0, 2.0]


# ---- max_pool2d on integers ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [sf.int64, sf.int32, sf.int16, sf.int8, sf.uint8], ids=str)
@pytest.mark.parametrize("kw", [{}, {"padding": 1}, {"stride": 2, "ceil_mode": True},
                                {"return_indices": True, "padding": 1, "dilation": 2}], ids=str)
def test_max_pool2d_on_integers(dtype, kw):
    a = rng.integers(0 if dtype is sf.uint8 else -100, 100, (2, 3, 7, 6)).astype(dtype.np)
    s = F.max_pool2d(sf.from_numpy(a.copy()), 3, **kw)
    t = TF.max_pool2d(torch.from_numpy(a.copy()), 3, **kw)
    for u, v in zip(s if isinstance(s, tuple) else (s,), t if isinstance(t, tuple) else (t,)):
        assert _torch_dtype(u.dtype) == v.dtype
        np.testing.assert_array_equal(u.numpy(), v.numpy())
    m = F.max_pool2d(sf.from_numpy(a).to("meta"), 3, **kw)
    m = m[0] if isinstance(m, tuple) else m
    assert m.dtype is dtype and tuple(m.shape) == tuple((t[0] if isinstance(t, tuple) else t)
                                                        .shape)


# ---- negative pads -------------------------------------------------------------------------

PADS = [(-1, 2), (2, -1), (-2, -1), (-1, -1), (-4, 3), (1, 1), (-1, 2, 1, -2), (0, -2, -1, 0)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", PADS, ids=str)
def test_negative_pads_in_every_mode(mode, pad):
    x = rng.standard_normal((2, 4, 5))
    if mode == "circular" and pad == (-4, 3):
        # the pad exceeds what is left after cropping: values agree, but PyTorch's gradient
        # counts only some of the wrapped copies (shapeflow sums them all)
        check_op(lambda t: F.pad(t, pad, mode=mode), lambda t: TF.pad(t, pad, mode=mode), x,
                 grad=False)
        return
    check_op(lambda t: F.pad(t, pad, mode=mode), lambda t: TF.pad(t, pad, mode=mode), x)


def test_circular_pad_that_leaves_nothing_raises():
    with pytest.raises(RuntimeError):
        F.pad(sf.ones(1, 2, 5), (-5, 1), mode="circular")


# ---- grouped-query attention ---------------------------------------------------------------


@pytest.mark.parametrize("hk", [1, 2, 4])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_enable_gqa(hk, causal):
    q, k, v = rng.standard_normal((2, 4, 5, 3)), rng.standard_normal((2, hk, 6, 3)), \
        rng.standard_normal((2, hk, 6, 2))

    def run(lib):
        fn = F.scaled_dot_product_attention if lib is sf else TF.scaled_dot_product_attention
        return lambda a, b, c: fn(a, b, c, is_causal=causal, enable_gqa=True)

    check_op(run(sf), run(torch), q, k, v)


def test_sdpa_gqa_heads_must_divide():
    with pytest.raises(RuntimeError):
        TF.scaled_dot_product_attention(torch.ones(1, 3, 2, 2), torch.ones(1, 2, 2, 2),
                                        torch.ones(1, 2, 2, 2), enable_gqa=True)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(sf.ones(1, 3, 2, 2), sf.ones(1, 2, 2, 2),
                                       sf.ones(1, 2, 2, 2), enable_gqa=True)
