"""The added math and activations vs PyTorch: values, grads, float64 gradcheck, meta shapes."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from tests.ops.harness import check_op

rng = np.random.default_rng(7)
SHAPES = [(3,), (2, 3), (2, 1, 4), ()]


def normal(shape):
    return rng.standard_normal(shape)


def unit(shape):  # inside (-1, 1), away from the ends
    return rng.uniform(-0.9, 0.9, size=shape)


def above_one(shape):
    return rng.uniform(1.2, 3.0, size=shape)


def positive(shape):
    return rng.uniform(0.3, 3.0, size=shape)


def away_from_kinks(shape, kinks=(0.0,), scale=4.0):
    """Normal draws nudged off the points where a piecewise op is not differentiable."""
    x = rng.standard_normal(shape) * scale
    for k in kinks:
        x = np.where(np.abs(x - k) < 0.05, x + 0.2, x)
    return x


MATH = [
    ("tan", sf.tan, torch.tan, unit),
    ("asin", sf.asin, torch.asin, unit),
    ("acos", sf.acos, torch.acos, unit),
    ("atan", sf.atan, torch.atan, normal),
    ("sinh", sf.sinh, torch.sinh, normal),
    ("cosh", sf.cosh, torch.cosh, normal),
    ("asinh", sf.asinh, torch.asinh, normal),
    ("acosh", sf.acosh, torch.acosh, above_one),
    ("atanh", sf.atanh, torch.atanh, unit),
    ("log2", sf.log2, torch.log2, positive),
    ("log10", sf.log10, torch.log10, positive),
    ("exp2", sf.exp2, torch.exp2, normal),
    ("frac", sf.frac, torch.frac, lambda s: away_from_kinks(s, (-2, -1, 0, 1, 2))),
    ("trunc", sf.trunc, torch.trunc, lambda s: away_from_kinks(s, (-2, -1, 0, 1, 2))),
    ("arctan_method", lambda x: x.arctan(), lambda x: x.arctan(), normal),
    ("copysign_scalar", lambda x: sf.copysign(x, -1.0), lambda x: torch.copysign(x, -1.0),
     normal),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,make", MATH, ids=[m[0] for m in MATH])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_math(name, sf_fn, t_fn, make, shape):
    check_op(sf_fn, t_fn, make(shape))


def test_copysign_tensor():
    a, b = normal((3, 4)), normal((4,))
    check_op(sf.copysign, torch.copysign, a, b)
    b[0] = -0.0  # the sign bit counts
    a[0, 0] = 0.0  # PyTorch's gradient is 0 where input is 0
    check_op(sf.copysign, torch.copysign, a, b, gradcheck=False)


@pytest.mark.parametrize("name", ["tan", "asin", "atan", "sinh", "log2", "log10", "exp2",
                                  "acosh"])
def test_integer_input_gives_default_float(name):
    x = np.arange(1, 5, dtype=np.int32)
    s, t = getattr(sf, name)(sf.from_numpy(x)), getattr(torch, name)(torch.from_numpy(x))
    assert str(t.dtype) == f"torch.{s.dtype}"
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-6)


def test_domain_edges_give_nan_and_inf_as_pytorch():
    x = np.array([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=np.float32)
    for name in ("asin", "acos", "atanh", "acosh", "log2", "log10"):
        s = getattr(sf, name)(sf.from_numpy(x)).numpy()
        t = getattr(torch, name)(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(s, t, rtol=1e-6, equal_nan=True)


def test_std_mean_var_mean():
    x = normal((3, 5))
    check_op(lambda t: sf.std_mean(t, 1), lambda t: torch.std_mean(t, 1), x)
    check_op(lambda t: sf.var_mean(t, (0, 1), keepdim=True),
             lambda t: torch.var_mean(t, (0, 1), keepdim=True), x)
    check_op(lambda t: sf.var_mean(t, 0, correction=0),
             lambda t: torch.var_mean(t, 0, correction=0), x)
    check_op(lambda t: sf.std_mean(t), lambda t: torch.std_mean(t), x)


ACT = [
    ("relu6", F.relu6, TF.relu6, lambda s: away_from_kinks(s, (0, 6))),
    ("hardtanh", F.hardtanh, TF.hardtanh, lambda s: away_from_kinks(s, (-1, 1))),
    ("hardtanh_range", lambda x: F.hardtanh(x, -2.0, 0.5),
     lambda x: TF.hardtanh(x, -2.0, 0.5), lambda s: away_from_kinks(s, (-2, 0.5))),
    ("selu", F.selu, TF.selu, away_from_kinks),
    ("celu", F.celu, TF.celu, away_from_kinks),
    ("celu_alpha", lambda x: F.celu(x, 0.5), lambda x: TF.celu(x, 0.5), away_from_kinks),
    ("softsign", F.softsign, TF.softsign, away_from_kinks),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid, normal),
    ("mish", F.mish, TF.mish, normal),
    ("hardswish", F.hardswish, TF.hardswish, lambda s: away_from_kinks(s, (-3, 3))),
    ("hardsigmoid", F.hardsigmoid, TF.hardsigmoid, lambda s: away_from_kinks(s, (-3, 3))),
    ("tanhshrink", F.tanhshrink, TF.tanhshrink, normal),
    ("softshrink", F.softshrink, TF.softshrink, lambda s: away_from_kinks(s, (-0.5, 0.5))),
    ("hardshrink", F.hardshrink, TF.hardshrink, lambda s: away_from_kinks(s, (-0.5, 0.5))),
    ("leaky_relu", F.leaky_relu, TF.leaky_relu, away_from_kinks),
    ("elu", F.elu, TF.elu, away_from_kinks),
    ("softplus", F.softplus, TF.softplus, normal),
]


@pytest.mark.parametrize("name,sf_fn,t_fn,make", ACT, ids=[a[0] for a in ACT])
@pytest.mark.parametrize("shape", SHAPES[:3], ids=str)
def test_activation(name, sf_fn, t_fn, make, shape):
    check_op(sf_fn, t_fn, make(shape))


def test_hardtanh_gradient_is_zero_on_the_bounds_as_pytorch():
    x = np.array([-1.0, 1.0, 0.0, 6.0, -2.0])
    check_op(F.hardtanh, TF.hardtanh, x, gradcheck=False)
    check_op(F.relu6, TF.relu6, x, gradcheck=False)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmin_and_glu(dim):
    x = normal((4, 6))
    check_op(lambda t: F.softmin(t, dim), lambda t: TF.softmin(t, dim), x)
    check_op(lambda t: F.glu(t, dim), lambda t: TF.glu(t, dim), x)


def test_glu_odd_dim_raises_as_pytorch():
    with pytest.raises(RuntimeError):
        TF.glu(torch.ones(2, 3))
    with pytest.raises(RuntimeError) as e:
        F.glu(sf.ones(2, 3))
    assert isinstance(e.value, sf.ShapeError)


@pytest.mark.parametrize("wshape", [(1,), (3,)])
def test_prelu(wshape):
    x, w = away_from_kinks((2, 3, 4)), rng.uniform(0.1, 0.5, wshape)
    check_op(F.prelu, TF.prelu, x, w)


# ---- modules -------------------------------------------------------------------------------

MODULES = [
    ("ReLU6", (), {}), ("SELU", (), {}), ("CELU", (0.7,), {}), ("Hardtanh", (-0.5, 2.0), {}),
    ("Softsign", (), {}), ("Softmin", (1,), {}), ("LogSigmoid", (), {}), ("LeakyReLU", (0.2,), {}),
    ("ELU", (0.5,), {}), ("Mish", (), {}), ("Softplus", (2.0, 10.0), {}), ("Hardswish", (), {}),
    ("Hardsigmoid", (), {}), ("LogSoftmax", (1,), {}), ("GLU", (1,), {}), ("Tanhshrink", (), {}),
    ("Softshrink", (0.3,), {}), ("Hardshrink", (0.3,), {}), ("PReLU", (), {}),
    ("PReLU", (4,), {"init": 0.1}),
]


@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=[f"{m[0]}{m[1]}" for m in MODULES])
def test_activation_modules(name, args, kwargs):
    x = away_from_kinks((3, 4, 2), (-3, -0.5, -0.3, 0, 0.3, 0.5, 2, 3)).astype(np.float32)
    sm, tm = getattr(sf.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(sm) == repr(tm)
    xs, xt = sf.from_numpy(x.copy()).requires_grad_(True), torch.from_numpy(x.copy())
    xt.requires_grad_(True)
    ys, yt = sm(xs), tm(xt)
    np.testing.assert_allclose(ys.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    ys.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for (ns, ps), (nt, pt) in zip(sm.named_parameters(), tm.named_parameters()):
        assert ns == nt
        np.testing.assert_allclose(ps.grad.numpy(), pt.grad.numpy(), rtol=1e-4, atol=1e-5)
    ym = sm.to("meta")(sf.from_numpy(x).to("meta"))
    assert ym.device == "meta" and tuple(ym.shape) == tuple(yt.shape)


def test_top_level_names():
    x = away_from_kinks((5,))
    for name in ("selu", "celu", "hardshrink"):
        s = getattr(sf, name)(sf.from_numpy(x.astype(np.float32)))
        t = getattr(torch, name)(torch.from_numpy(x.astype(np.float32)))
        np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-6)
    assert sf.from_numpy(x).hardshrink(0.1).shape == (5,)
