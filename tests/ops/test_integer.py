"""Integer and bitwise semantics vs PyTorch: bitwise ops, shifts, fmod, rounded division,
integer division by zero, and pow's gradients at 0 and negative bases."""

import numpy as np
import pytest
import torch

import shapeflow as sf
from tests.ops.harness import TORCH_DTYPES, check_op

rng = np.random.default_rng(3)
INTS = [sf.int8, sf.int16, sf.int32, sf.int64, sf.uint8]


def _pair(dtype, lo=-100, hi=100, shape=(4, 5)):
    if dtype is sf.uint8:
        lo = 0
    a = rng.integers(lo, hi, size=shape).astype(dtype.np)
    return a


def _same(s, t):
    """Same dtype and the same values (NaN == NaN)."""
    assert TORCH_DTYPES[s.dtype] == t.dtype, (s.dtype, t.dtype)
    np.testing.assert_array_equal(s.numpy(), t.numpy())


def _both(fn, *arrays):
    return fn(*[sf.from_numpy(a.copy()) for a in arrays]), fn(*[torch.from_numpy(a.copy())
                                                               for a in arrays])


BITWISE = [
    ("and", lambda a, b: a & b), ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b),
    ("bitwise_and", lambda a, b: a.bitwise_and(b)), ("bitwise_or", lambda a, b: a.bitwise_or(b)),
    ("bitwise_xor", lambda a, b: a.bitwise_xor(b)),
]


@pytest.mark.parametrize("name,fn", BITWISE, ids=[b[0] for b in BITWISE])
@pytest.mark.parametrize("da", INTS + [sf.bool], ids=str)
@pytest.mark.parametrize("db", [sf.int32, sf.uint8, sf.bool], ids=str)
def test_bitwise_binary(name, fn, da, db):
    a = _pair(da) if da is not sf.bool else rng.random((4, 5)) > 0.5
    b = _pair(db, shape=(5,)) if db is not sf.bool else rng.random((5,)) > 0.5
    _same(*_both(fn, a, b))


@pytest.mark.parametrize("dtype", INTS + [sf.bool], ids=str)
@pytest.mark.parametrize("c", [3, -8, True, 0])
def test_bitwise_with_scalar(dtype, c):
    a = _pair(dtype) if dtype is not sf.bool else rng.random((4, 5)) > 0.5
    for fn in (lambda x: x & c, lambda x: c | x, lambda x: x ^ c):
        _same(*_both(fn, a))


def test_issue_examples():
    x = sf.tensor([1, -8, 32], dtype=sf.int32) & 3
    assert x.dtype is sf.int32 and x.tolist() == [1, 0, 0]
    y = ~sf.tensor([2, 2], dtype=sf.int32)
    assert y.dtype is sf.int32 and y.tolist() == [-3, -3]


@pytest.mark.parametrize("dtype", INTS + [sf.bool], ids=str)
def test_bitwise_not(dtype):
    a = _pair(dtype) if dtype is not sf.bool else rng.random((4, 5)) > 0.5
    _same(*_both(lambda x: ~x, a))
    _same(*_both(lambda x: x.bitwise_not(), a))


SHIFTS = [("lshift", lambda a, b: a << b), ("rshift", lambda a, b: a >> b),
          ("left", lambda a, b: a.bitwise_left_shift(b)),
          ("right", lambda a, b: a.bitwise_right_shift(b))]


@pytest.mark.parametrize("name,fn", SHIFTS, ids=[s[0] for s in SHIFTS])
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_shifts(name, fn, dtype):
    a = _pair(dtype)
    b = rng.integers(-2, 2 * 8 * dtype.itemsize + 3, size=(5,)).astype(np.int64)
    b = b.astype(dtype.np) if dtype is not sf.uint8 else np.clip(b, 0, None).astype(np.uint8)
    _same(*_both(fn, a, b))
    for c in (0, 1, 3, 7, 40, 70):
        _same(*_both(lambda x, c=c: fn(x, c), a))
    if name in ("lshift", "rshift"):
        _same(*_both(lambda x: fn(1, x), np.arange(0, 7).astype(dtype.np)))


def test_shifts_of_bools_promote_as_pytorch():
    _same(*_both(lambda x: x << 1, np.array([True, False])))
    for fn in (lambda x: x >> True, lambda x: x << x):
        with pytest.raises(NotImplementedError):
            fn(torch.tensor([True]))
        with pytest.raises(NotImplementedError):
            fn(sf.tensor([True]))


FLOAT_BITWISE = [
    lambda x: x & x, lambda x: x | 1, lambda x: 1 ^ x, lambda x: x << 1, lambda x: x >> x,
    lambda x: x.bitwise_not(), lambda x: x.bitwise_and(x),
]


@pytest.mark.parametrize("i", range(len(FLOAT_BITWISE)))
def test_bitwise_on_floats_raises_as_pytorch(i):
    fn = FLOAT_BITWISE[i]
    with pytest.raises(Exception) as te:
        fn(torch.ones(3))
    with pytest.raises(sf.ShapeflowError) as se:
        fn(sf.ones(3))
    assert isinstance(se.value, type(te.value))
    with pytest.raises(type(te.value)):
        fn(sf.ones(3, device="meta"))


def test_invert_on_floats_is_a_type_error_as_pytorch():
    with pytest.raises(TypeError):
        ~torch.ones(2)
    with pytest.raises(TypeError) as e:
        ~sf.ones(2)
    assert isinstance(e.value, sf.DTypeError)


def test_int_with_float_scalar_raises():
    with pytest.raises(NotImplementedError):
        torch.tensor([1]) & 1.5
    with pytest.raises(NotImplementedError):
        sf.tensor([1]) & 1.5


def test_inplace_bitwise():
    x, t = sf.tensor([5, 6, 7]), torch.tensor([5, 6, 7])
    x &= 3
    t &= 3
    x |= 8
    t |= 8
    x <<= 1
    t <<= 1
    _same(x, t)


# ---- division and remainder ---------------------------------------------------------------

DIVS = [
    ("floordiv", lambda a, b: a // b), ("mod", lambda a, b: a % b),
    ("fmod", lambda a, b: a.fmod(b)), ("remainder", lambda a, b: a.remainder(b)),
    ("trunc", lambda a, b: a.div(b, rounding_mode="trunc")),
    ("floor", lambda a, b: a.div(b, rounding_mode="floor")),
]


@pytest.mark.parametrize("name,fn", DIVS, ids=[d[0] for d in DIVS])
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_division_keeps_dtype_and_rounds_as_pytorch(name, fn, dtype):
    a = _pair(dtype)
    b = _pair(dtype, shape=(5,))
    b[b == 0] = 3
    _same(*_both(fn, a, b))
    for c in (3, -7):
        if dtype is sf.uint8 and c < 0:
            continue
        _same(*_both(lambda x, c=c: fn(x, c), a))


@pytest.mark.parametrize("name,fn", DIVS, ids=[d[0] for d in DIVS])
def test_float_division_values(name, fn):
    a = (rng.standard_normal((6, 7)) * 10).astype(np.float32)
    b = (rng.standard_normal((7,)) * 3).astype(np.float32)
    s, t = _both(fn, a, b)
    assert TORCH_DTYPES[s.dtype] == t.dtype
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)
    s, t = _both(lambda x: fn(x, -2.5), a)
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


def test_fmod_has_the_sign_of_the_dividend():
    a = np.array([5.0, -5.0, 5.0, -5.0], dtype=np.float32)
    b = np.array([3.0, 3.0, -3.0, -3.0], dtype=np.float32)
    s, t = _both(lambda x, y: x.fmod(y), a, b)
    assert s.tolist() == t.tolist() == [2.0, -2.0, 2.0, -2.0]
    s, t = _both(lambda x, y: x.remainder(y), a, b)
    assert s.tolist() == t.tolist() == [2.0, 1.0, -1.0, -2.0]


def test_fmod_gradients():
    a = rng.standard_normal((3, 4)) * 5
    b = rng.uniform(0.5, 2.0, (4,)) * np.sign(rng.standard_normal(4))
    check_op(sf.fmod, torch.fmod, a, b)
    check_op(lambda x: sf.fmod(x, 1.5), lambda x: torch.fmod(x, 1.5), a)


def test_trunc_division_of_floats_has_zero_gradient():
    a, b = rng.standard_normal((3,)) * 5, rng.uniform(0.5, 2, (3,))
    check_op(lambda x, y: sf.div(x, y, rounding_mode="trunc"),
             lambda x, y: torch.div(x, y, rounding_mode="trunc"), a, b, gradcheck=False)


ZERO_DIV = [
    lambda L: L.tensor([1, 2]) // 0, lambda L: L.tensor([1, 2]) % 0,
    lambda L: L.tensor([1, 2]) // L.tensor([0, 1]), lambda L: L.tensor([1, 2]) % L.tensor([1, 0]),
    lambda L: 7 // L.tensor([0, 1]), lambda L: 7 % L.tensor([0, 1]),
    lambda L: L.fmod(L.tensor([5, -5]), 0), lambda L: L.fmod(L.tensor([5]), L.tensor([0])),
    lambda L: L.div(L.tensor([5]), 0, rounding_mode="trunc"),
    lambda L: L.div(L.tensor([5]), L.tensor([0]), rounding_mode="floor"),
    lambda L: L.tensor(5, dtype=L.int8) // 0,
]


@pytest.mark.parametrize("i", range(len(ZERO_DIV)))
def test_integer_division_by_zero_raises_as_pytorch(i):
    with pytest.raises(RuntimeError):
        ZERO_DIV[i](torch)
    with pytest.raises(RuntimeError) as e:
        ZERO_DIV[i](sf)
    assert isinstance(e.value, sf.ShapeflowError) and isinstance(e.value, ZeroDivisionError)


def test_float_division_by_zero_gives_inf_and_nan():
    for fn in (lambda L: L.tensor([5.0, -5.0, 0.0]) // 0, lambda L: L.tensor([5.0, 0.0]) % 0,
               lambda L: L.fmod(L.tensor([5.0, 0.0]), 0.0), lambda L: L.tensor([5, -5]) // 0.0):
        _same(fn(sf), fn(torch))


def test_bool_floor_division_raises_as_pytorch():
    for fn in (lambda L: L.tensor([True]) // L.tensor([True]),
               lambda L: L.tensor([True]) % L.tensor([True])):
        with pytest.raises(NotImplementedError):
            fn(torch)
        with pytest.raises(NotImplementedError):
            fn(sf)


def test_bad_rounding_mode():
    with pytest.raises(RuntimeError):
        torch.div(torch.ones(2), 2, rounding_mode="round")
    with pytest.raises(RuntimeError) as e:
        sf.div(sf.ones(2), 2, rounding_mode="round")
    assert isinstance(e.value, sf.ShapeflowError)


def test_division_on_meta_keeps_integer_dtype():
    x = sf.ones(3, dtype=sf.int16, device="meta")
    assert sf.div(x, 2, rounding_mode="trunc").dtype is sf.int16
    assert sf.div(x, x, rounding_mode="floor").dtype is sf.int16
    assert (x & 3).dtype is sf.int16 and (~x).dtype is sf.int16 and (x << 2).dtype is sf.int16


# ---- pow -----------------------------------------------------------------------------------


def _grads(fn, *arrays, L):
    ts = [(sf.from_numpy if L is sf else torch.from_numpy)(np.array(a, dtype=np.float64))
          for a in arrays]
    for t in ts:
        t.requires_grad_(True)
    out = fn(*ts)
    out.sum().backward()
    return [t.grad.numpy() for t in ts]


POW_GRADS = [
    ("tensor_tensor", lambda a, b: a ** b, [[0.0, 0.0, 0.0, 2.0, -2.0], [2.0, 0.0, 0.5, 3.0,
                                                                           2.0]]),
    ("zero_base_neg_exp", lambda a, b: a ** b, [[0.0, 0.0], [-1.0, -0.5]]),
    ("scalar_exp", lambda a: a ** 0, [[0.0, 1.0, -2.0]]),
    ("scalar_exp_2", lambda a: a ** 2.0, [[0.0, 1.0, -2.0]]),
    ("scalar_exp_half", lambda a: a ** 0.5, [[0.0, 1.0, 4.0]]),
    ("neg_base", lambda a: (-2.0) ** a, [[0.0, 1.0, 2.0]]),
    ("zero_base", lambda a: 0.0 ** a, [[0.0, 1.0, -1.0, 2.0]]),
    ("one_base", lambda a: 1.0 ** a, [[0.0, 1.0, -1.0]]),
]


@pytest.mark.parametrize("name,fn,args", POW_GRADS, ids=[p[0] for p in POW_GRADS])
def test_pow_gradients_match_pytorch_at_special_points(name, fn, args):
    for gs, gt in zip(_grads(fn, *args, L=sf), _grads(fn, *args, L=torch)):
        np.testing.assert_allclose(gs, gt, rtol=1e-12, equal_nan=True)


def test_integer_negative_powers():
    with pytest.raises(RuntimeError):
        torch.tensor([2, 3]) ** -1
    with pytest.raises(RuntimeError) as e:
        sf.tensor([2, 3]) ** -1
    assert isinstance(e.value, sf.DTypeError)
    a = np.array([2, 1, -1, -1, 0, 3, -2], dtype=np.int64)
    b = np.array([-1, -3, -3, -2, 2, 2, 3], dtype=np.int64)
    _same(*_both(lambda x, y: x ** y, a, b))
    _same(*_both(lambda x: 2 ** x, b[b >= 0]))
