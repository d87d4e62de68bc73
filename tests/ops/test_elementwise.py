"""Elementwise ops vs PyTorch: values, grads, float64 gradcheck, meta shapes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(0)
SHAPES = [(3,), (2, 3), (2, 1, 4), (1,), ()]


def positive(shape):
    return rng.uniform(0.5, 2.0, size=shape)


def normal(shape):
    return rng.standard_normal(shape)


UNARY = [
    ("neg", lambda x: -x, lambda x: -x, normal),
    ("abs", sf.abs, torch.abs, normal),
    ("exp", sf.exp, torch.exp, normal),
    ("log", sf.log, torch.log, positive),
    ("log1p", sf.log1p, torch.log1p, positive),
    ("expm1", sf.expm1, torch.expm1, normal),
    ("sqrt", sf.sqrt, torch.sqrt, positive),
    ("rsqrt", sf.rsqrt, torch.rsqrt, positive),
    ("sin", sf.sin, torch.sin, normal),
    ("cos", sf.cos, torch.cos, normal),
    ("tanh", sf.tanh, torch.tanh, normal),
    ("sigmoid", sf.sigmoid, torch.sigmoid, normal),
    ("relu", sf.relu, torch.relu, normal),
    ("gelu", sf.gelu, TF.gelu, normal),
    ("gelu_tanh", lambda x: sf.gelu(x, approximate="tanh"),
     lambda x: TF.gelu(x, approximate="tanh"), normal),
    ("silu", sf.silu, TF.silu, normal),
    ("softplus", sf.softplus, TF.softplus, normal),
    ("square", sf.square, torch.square, normal),
    ("reciprocal", sf.reciprocal, torch.reciprocal, positive),
    ("clamp", lambda x: sf.clamp(x, -0.5, 0.5), lambda x: torch.clamp(x, -0.5, 0.5), normal),
    ("clamp_min", lambda x: x.clamp(min=0.1), lambda x: x.clamp(min=0.1), normal),
    ("sign", sf.sign, torch.sign, normal),
    ("pow_scalar", lambda x: x ** 3, lambda x: x ** 3, normal),
    ("pow_frac", lambda x: x ** 0.5, lambda x: x ** 0.5, positive),
    ("rpow", lambda x: 2.0 ** x, lambda x: 2.0 ** x, normal),
    ("add_scalar", lambda x: x + 2, lambda x: x + 2, normal),
    ("rsub_scalar", lambda x: 2 - x, lambda x: 2 - x, normal),
    ("mul_scalar", lambda x: 3 * x, lambda x: 3 * x, normal),
    ("div_scalar", lambda x: x / 3, lambda x: x / 3, normal),
    ("rdiv_scalar", lambda x: 3 / x, lambda x: 3 / x, positive),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,make", UNARY, ids=[u[0] for u in UNARY])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unary(name, sf_fn, t_fn, make, shape):
    check_op(sf_fn, t_fn, make(shape))


BINARY = [
    ("add", lambda a, b: a + b, normal, normal),
    ("sub", lambda a, b: a - b, normal, normal),
    ("mul", lambda a, b: a * b, normal, normal),
    ("div", lambda a, b: a / b, normal, positive),
    ("pow", lambda a, b: a ** b, positive, normal),
    ("maximum", lambda a, b: a.maximum(b) if isinstance(a, sf.Tensor) else torch.maximum(a, b),
     normal, normal),
    ("minimum", lambda a, b: a.minimum(b) if isinstance(a, sf.Tensor) else torch.minimum(a, b),
     normal, normal),
]
PAIRS = [((2, 3), (2, 3)), ((2, 3), (3,)), ((4, 1), (1, 5)), ((2, 1, 3), (4, 1)), ((), (3,)),
         ((0, 3), (3,))]


@pytest.mark.parametrize("name,fn,make_a,make_b", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("sa,sb", PAIRS, ids=str)
def test_binary(name, fn, make_a, make_b, sa, sb):
    check_op(fn, fn, make_a(sa), make_b(sb))


def test_remainder_and_floor_divide():
    a, b = normal((3, 4)) * 5, positive((4,))
    check_op(lambda x, y: x % y, lambda x, y: x % y, a, b)
    check_op(lambda x, y: x // y, lambda x, y: x // y, a, b, grad=False)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op):
    a = rng.integers(0, 3, (3, 4)).astype(np.float32)
    b = rng.integers(0, 3, (4,)).astype(np.float32)
    out = getattr(sf, op)(sf.tensor(a), sf.tensor(b))
    ref = getattr(torch, op)(torch.tensor(a), torch.tensor(b))
    assert out.dtype is sf.bool
    np.testing.assert_array_equal(out.numpy(), ref.numpy())
    assert np.array_equal(getattr(sf.tensor(a), f"__{op}__")(1.0).numpy(),
                          getattr(torch.tensor(a), f"__{op}__")(1.0).numpy())


def test_logical_ops():
    a = sf.tensor([True, False, True])
    b = sf.tensor([True, True, False])
    assert (a & b).tolist() == [True, False, False]
    assert (a | b).tolist() == [True, True, True]
    assert (~a).tolist() == [False, True, False]
    assert sf.logical_xor(a, b).tolist() == [False, True, True]


def test_where():
    c = rng.standard_normal((3, 4)) > 0
    check_op(lambda c, a, b: sf.where(c, a, b), lambda c, a, b: torch.where(c, a, b),
             c, normal((3, 4)), normal((4,)))


@pytest.mark.parametrize("dtype_a,dtype_b,expected", [
    (sf.int64, sf.float32, sf.float32), (sf.float16, sf.bfloat16, sf.float32),
    (sf.int8, sf.uint8, sf.int16), (sf.bool, sf.int32, sf.int32),
    (sf.float32, sf.float64, sf.float64), (sf.int32, sf.int64, sf.int64),
])
def test_promotion_table(dtype_a, dtype_b, expected):
    a = sf.ones(2, dtype=dtype_a)
    b = sf.ones(2, dtype=dtype_b)
    assert (a + b).dtype is expected
    assert sf.promote_types(dtype_a, dtype_b) is expected


def test_scalar_does_not_upcast():
    assert (sf.ones(2, dtype=sf.float16) * 2.5).dtype is sf.float16
    assert (sf.ones(2, dtype=sf.int32) + 1).dtype is sf.int32
    assert (sf.ones(2, dtype=sf.int32) * 1.5).dtype is sf.float32
    assert (sf.ones(2, dtype=sf.bool) + 1).dtype is sf.int64
    assert (sf.ones(2, dtype=sf.int64) / 2).dtype is sf.float32
    assert (sf.ones(2, dtype=sf.float16) + sf.tensor(1.0, dtype=sf.float64)).dtype is sf.float16


def test_broadcast_error_names_shapes():
    with pytest.raises(sf.ShapeError) as e:
        sf.ones(2, 3) + sf.ones(4)
    assert "[2, 3]" in str(e.value) and "[4]" in str(e.value) and e.value.op == "add"


def test_mixed_devices_raise_device_error():
    with pytest.raises(sf.DeviceError) as e:
        sf.ones(2) + sf.ones(2, device="meta")
    assert "cpu" in str(e.value) and "meta" in str(e.value)


float_arrays = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4)


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       st.sampled_from(["add", "sub", "mul", "div", "maximum"]))
def test_binary_broadcasting_hypothesis(shapes, op):
    sa, sb = shapes.input_shapes
    a = rng.standard_normal(sa)
    b = rng.uniform(0.5, 2, sb)
    fns = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
           "div": lambda x, y: x / y}
    fn = fns.get(op)
    if fn is None:
        sf_fn, t_fn = sf.maximum, torch.maximum
    else:
        sf_fn = t_fn = fn
    check_op(sf_fn, t_fn, a, b, gradcheck=False)


@pytest.mark.parametrize("fn", [
    lambda x: x * x, lambda x: sf.exp(x), lambda x: sf.tanh(x), lambda x: (x * x).sum(),
])
def test_grad_of_grad(fn):
    x = rng.standard_normal((3,))
    xs = sf.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    tfn = {0: lambda x: x * x}.get(0)
    del tfn
    ys, yt = fn(xs), (fn(xt) if fn.__code__.co_names == () else None)
    (gs,) = sf.autograd.grad(ys.sum(), xs, create_graph=True)
    yt = eval_torch(fn, xt)
    (gt,) = torch.autograd.grad(yt.sum(), xt, create_graph=True)
    np.testing.assert_allclose(gs.detach().numpy(), gt.detach().numpy(), rtol=1e-6)
    (ggs,) = sf.autograd.grad(gs.sum(), xs)
    (ggt,) = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(ggs.numpy(), ggt.numpy(), rtol=1e-6)


def eval_torch(fn, xt):
    """Run a lambda written for shapeflow on torch by mapping sf names to torch."""
    import types

    g = dict(fn.__globals__)
    g["sf"] = types.SimpleNamespace(exp=torch.exp, tanh=torch.tanh)
    return types.FunctionType(fn.__code__, g)(xt)
