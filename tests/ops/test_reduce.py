"""Reductions vs PyTorch: values, grads, float64 gradcheck, saved bytes, meta shapes."""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import shapeflow as sf
from tests.ops.harness import check_op

rng = np.random.default_rng(0)
SHAPES = [(3,), (2, 3), (2, 1, 4), (1,), (), (1, 1), (0, 3)]


def normal(shape):
    return rng.standard_normal(shape)


def dims_for(shape):
    """dim arguments to try on a tensor of `shape`: None, ints (negative too), tuples, ()."""
    n = len(shape)
    out = [None]
    if n == 0:
        return out + [0, -1, ()]
    out += [0, -1]
    if n >= 2:
        out += [(0, -1), (-2,), ()]
    if n >= 3:
        out += [1, (0, 2)]
    return out


def _all_dims(x, dim):
    """torch.logsumexp takes no None (and mishandles ()): every dim, spelled out."""
    return tuple(range(x.ndim)) if dim is None or dim == () else dim


def _reduced(shape, dim):
    """The dims `dim` reduces (PyTorch: None and () mean all)."""
    n = len(shape)
    if dim is None or dim == ():
        return list(range(n))
    dims = (dim,) if isinstance(dim, int) else dim
    return [d % n for d in dims] if n else []


def _count(shape, dim):
    return math.prod(shape[d] for d in _reduced(shape, dim))


def _empty_reduced(shape, dim):
    return _count(shape, dim) == 0 or (math.prod(shape) == 0 and dim is None)


def _torch_prod(x, dim, keepdim):
    if dim is None or dim == ():
        out = x.prod()
        return out.reshape((1,) * x.ndim) if keepdim else out
    if isinstance(dim, int):
        return x.prod(dim, keepdim)
    out = x
    for d in sorted((d % x.ndim for d in dim), reverse=True):
        out = out.prod(d, keepdim)
    return out


def _no_empty(dim):
    """torch.var(dim=()) reduces every dim but its backward divides by N - correction with
    N = 1 (inf gradients): ask torch with dim=None, which means the same."""
    return None if dim == () else dim


def _torch_max(x, dim, keepdim, name):
    if dim is None:
        return getattr(x, name)()
    return tuple(getattr(x, name)(dim, keepdim))


# name -> (shapeflow fn, torch fn, which dims it takes, allowed on an empty reduction)
OPS = {
    "sum": (lambda x, d, k: x.sum(dim=d, keepdim=k), lambda x, d, k: x.sum(dim=d, keepdim=k),
            "any", True),
    "mean": (lambda x, d, k: x.mean(d, k), lambda x, d, k: x.mean(d, k), "any", True),
    "prod": (lambda x, d, k: x.prod(d, k), _torch_prod, "any", True),
    "amax": (lambda x, d, k: x.amax(() if d is None else d, k),
             lambda x, d, k: x.amax(() if d is None else d, k), "any", False),
    "amin": (lambda x, d, k: sf.amin(x, () if d is None else d, keepdim=k),
             lambda x, d, k: torch.amin(x, () if d is None else d, keepdim=k), "any", False),
    "max": (lambda x, d, k: sf.max(x) if d is None else tuple(sf.max(x, d, k)),
            lambda x, d, k: _torch_max(x, d, k, "max"), "int", False),
    "min": (lambda x, d, k: x.min() if d is None else tuple(x.min(dim=d, keepdim=k)),
            lambda x, d, k: _torch_max(x, d, k, "min"), "int", False),
    "var": (lambda x, d, k: x.var(d, keepdim=k),
            lambda x, d, k: x.var(_no_empty(d), keepdim=k), "any", True),
    "var0": (lambda x, d, k: sf.var(x, d, keepdim=k, correction=0),
             lambda x, d, k: torch.var(x, _no_empty(d), keepdim=k, correction=0), "any", True),
    "std": (lambda x, d, k: x.std(d, keepdim=k),
            lambda x, d, k: x.std(_no_empty(d), keepdim=k), "any", True),
    "std_biased": (lambda x, d, k: x.std(d, unbiased=False, keepdim=k),
                   lambda x, d, k: x.std(_no_empty(d), unbiased=False, keepdim=k), "any", True),
    "logsumexp": (lambda x, d, k: sf.logsumexp(x, _all_dims(x, d), k),
                  lambda x, d, k: torch.logsumexp(x, _all_dims(x, d), k), "any", True),
    # torch.norm('fro') rejects 3 dims; the vector norm is the same thing
    "norm": (lambda x, d, k: x.norm(dim=d, keepdim=k),
             lambda x, d, k: torch.linalg.vector_norm(x, 2, _no_empty(d), k), "any", True),
    "norm3": (lambda x, d, k: sf.norm(x, 3, d, k), lambda x, d, k: torch.norm(x, 3, d, k),
              "any", True),
    "norm1": (lambda x, d, k: sf.norm(x, 1, d, k), lambda x, d, k: torch.norm(x, 1, d, k),
              "any", True),
    "norm_inf": (lambda x, d, k: sf.norm(x, math.inf, d, k),
                 lambda x, d, k: torch.norm(x, math.inf, d, k), "any", False),
    "cumsum": (lambda x, d, k: x.cumsum(d), lambda x, d, k: x.cumsum(d), "int_only", True),
}


def _cases():
    for name, (_, _, takes, empty_ok) in OPS.items():
        for shape in SHAPES:
            for dim in dims_for(shape):
                if takes != "any" and not (isinstance(dim, int) or
                                           (takes == "int" and dim is None)):
                    continue
                if name == "norm_inf" and dim == ():
                    continue  # torch.norm(p=inf, dim=()) reduces nothing; amax(()) all
                if not empty_ok and _empty_reduced(shape, dim):
                    continue
                for keepdim in (False, True):
                    if name == "cumsum" and keepdim:
                        continue
                    if name in ("max", "min") and dim is None and keepdim:
                        continue
                    yield pytest.param(name, shape, dim, keepdim,
                                       id=f"{name}-{list(shape)}-dim={dim}-keepdim={keepdim}")


@pytest.mark.parametrize("name,shape,dim,keepdim", list(_cases()))
def test_reduction(name, shape, dim, keepdim):
    sf_fn, t_fn, _, _ = OPS[name]
    correction = 0 if name in ("var0", "std_biased") else 1
    # N <= correction gives inf/nan (as in PyTorch): compare values, not finite differences
    finite = not (name.startswith(("var", "std")) and _count(shape, dim) <= correction)
    with warnings.catch_warnings():
        if not finite or 0 in shape:  # torch warns of degrees of freedom, NumPy of inf - inf
            warnings.simplefilter("ignore")
        check_op(lambda x: sf_fn(x, dim, keepdim), lambda x: t_fn(x, dim, keepdim),
                 normal(shape), gradcheck=finite)


@pytest.mark.parametrize("name", ["sum", "mean", "prod", "amax", "var", "logsumexp", "norm"])
def test_keepdim_shapes_and_methods(name):
    x = sf.ones(2, 3, 4)
    fn = getattr(x, name)
    assert fn(dim=(0, 2), keepdim=True).shape == (1, 3, 1)
    assert fn(dim=-1).shape == (2, 3)
    assert getattr(sf, name) is getattr(sf.Tensor, name)


def test_engine_style_sum_and_zero_dim():
    x = sf.tensor(np.arange(6.0).reshape(2, 3))
    assert x.sum(dim=(0,), keepdim=True).shape == (1, 3)
    assert sf.tensor(2.0).sum(0).item() == 2.0
    assert sf.tensor(2.0).amax(-1).item() == 2.0
    assert x.sum(dim=()).shape == ()  # PyTorch: an empty dim list means every dim
    assert x.all(dim=()).shape == (2, 3)  # ...except for all/any, where it means none


# ---- max / min ---------------------------------------------------------------------------
def test_max_dim_returns_values_and_indices():
    x = sf.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    r = sf.max(x, 1)
    assert isinstance(r, tuple) and len(r) == 2
    values, indices = r
    assert r.values is values and r.indices is indices
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    assert indices.dtype is sf.int64 and not indices.requires_grad
    r = x.min(dim=0, keepdim=True)
    assert r.values.shape == (1, 3) and r.indices.tolist() == [[0, 1, 0]]
    assert type(r).__name__ == "min"


def test_max_dim_gradient_goes_to_returned_index_on_ties():
    data = np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0]])
    check_op(lambda x: tuple(x.max(1)), lambda x: tuple(x.max(1)), data, gradcheck=False)
    check_op(lambda x: tuple(x.min(0, True)), lambda x: tuple(x.min(0, True)), data,
             gradcheck=False)


@pytest.mark.parametrize("fn", [
    lambda x: x.amax(), lambda x: x.amax(1), lambda x: x.amin(0), lambda x: x.max(),
    lambda x: x.min(), lambda x: x.amax((0, 1), keepdim=True),
], ids=["amax", "amax1", "amin0", "max", "min", "amax_keepdim"])
def test_ties_split_the_gradient_evenly(fn):
    data = np.array([[3.0, 1.0, 3.0], [1.0, 1.0, 3.0]])
    check_op(fn, fn, data, gradcheck=False)


def test_max_of_two_tensors_is_maximum():
    a, b = normal((2, 3)), normal((3,))
    check_op(lambda x, y: sf.max(x, y), lambda x, y: torch.max(x, y), a, b)
    check_op(lambda x, y: x.min(y), lambda x, y: x.min(y), a, b)


def test_max_dim_must_be_an_int():
    with pytest.raises(sf.ShapeError, match="amax"):
        sf.ones(2, 3).max((0, 1))


def test_max_dim_on_meta_gives_meta_indices():
    x = sf.ones(2, 3, device="meta", requires_grad=True)
    values, indices = x.max(-1)
    assert indices.device == "meta" and indices.shape == (2,) and indices.dtype is sf.int64
    values.sum().backward()
    assert x.grad.device == "meta" and x.grad.shape == (2, 3)


def test_max_indices_are_not_the_saved_ones():
    x = sf.tensor([[1.0, 5.0], [7.0, 0.0]], requires_grad=True)
    values, indices = x.max(1)
    indices._data[...] = 0  # changing the returned indices must not move the gradient
    values.sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0], [1.0, 0.0]]


# ---- argmax / argmin ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 1, 4), (1,), ()], ids=str)
@pytest.mark.parametrize("dim", [None, 0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax(name, shape, dim, keepdim):
    x = normal(shape).astype(np.float32)
    out = getattr(sf, name)(sf.tensor(x), dim, keepdim)
    ref = getattr(torch, name)(torch.tensor(x), dim, keepdim)
    assert out.dtype is sf.int64 and out.shape == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


def test_argmax_ties_nan_and_no_grad():
    x = sf.tensor([3.0, 1.0, 3.0, 1.0], requires_grad=True)
    assert x.argmax().item() == 0 and x.argmin().item() == 1
    assert not x.argmax().requires_grad
    assert sf.tensor([1.0, float("nan"), 3.0]).argmax().item() == 1
    assert sf.tensor([[1, 9], [8, 2]]).argmax().item() == 1  # flattened
    with pytest.raises(sf.DTypeError, match="bool"):
        sf.tensor([True, False]).argmax()


# ---- dtypes -------------------------------------------------------------------------------
INT_RESULTS = [
    ("sum", lambda x: x.sum()), ("sum_dim", lambda x: x.sum(0)), ("prod", lambda x: x.prod()),
    ("cumsum", lambda x: x.cumsum(0)), ("max", lambda x: x.max()), ("amax", lambda x: x.amax(0)),
    ("min_dim", lambda x: x.min(0)[0]), ("all", lambda x: x.all(0)), ("any", lambda x: x.any()),
    ("logsumexp", lambda x: x.logsumexp(0)),
]


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "int8", "bool"])
@pytest.mark.parametrize("name,fn", INT_RESULTS, ids=[r[0] for r in INT_RESULTS])
def test_integer_result_dtypes_follow_pytorch(name, fn, dtype):
    data = np.array([[1, 0, 3], [2, 2, 1]]).astype(dtype)
    ref = fn(torch.from_numpy(data))
    out = fn(sf.from_numpy(data))
    assert out.dtype.name == str(ref.dtype).removeprefix("torch."), (out.dtype, ref.dtype)
    np.testing.assert_allclose(out.numpy().astype(np.float64),
                               ref.numpy().astype(np.float64), rtol=1e-6)


@pytest.mark.parametrize("fn", [lambda x: x.mean(), lambda x: x.var(0), lambda x: x.std(),
                                lambda x: x.norm()], ids=["mean", "var", "std", "norm"])
def test_float_only_reductions_reject_ints_like_pytorch(fn):
    data = np.arange(6).reshape(2, 3)
    with pytest.raises(RuntimeError):
        fn(torch.from_numpy(data))
    with pytest.raises(sf.DTypeError) as e:
        fn(sf.from_numpy(data))
    assert "[2, 3] int64" in str(e.value)


def test_dtype_arguments():
    x = sf.tensor([[1, 2], [3, 4]])
    assert x.mean(dtype=sf.float32).item() == 2.5
    assert x.prod(dtype=sf.float64).dtype is sf.float64
    assert x.cumsum(1, dtype=sf.float32).dtype is sf.float32
    assert x.sum(dtype=sf.float32).dtype is sf.float32
    assert sf.amax(sf.tensor([True, False])).dtype is sf.bool


def test_half_precision_reductions_keep_their_dtype():
    x = np.linspace(-2, 2, 12).reshape(3, 4).astype(np.float16)
    for fn in (lambda t: t.var(1), lambda t: t.logsumexp(0), lambda t: t.norm(), lambda t:
               t.mean(0)):
        out, ref = fn(sf.from_numpy(x)), fn(torch.from_numpy(x))
        assert out.dtype is sf.float16
        np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy().astype(
            np.float32), rtol=2e-3, atol=2e-3)


# ---- empty reductions and bad dims ------------------------------------------------------
def test_empty_reductions_have_pytorchs_values():
    e = np.zeros((0, 3), dtype=np.float32)
    for fn in (lambda t: t.sum(0), lambda t: t.prod(0), lambda t: t.mean(0),
               lambda t: t.var(0), lambda t: t.logsumexp(0), lambda t: t.all(0),
               lambda t: t.any(0), lambda t: t.norm(), lambda t: t.amax(1),
               lambda t: t.max(1)[0], lambda t: t.argmax(1), lambda t: t.cumsum(0)):
        with np.errstate(divide="raise", invalid="raise", over="raise"):
            out = fn(sf.from_numpy(e))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch: var() degrees of freedom <= 0
            ref = fn(torch.from_numpy(e))
        assert out.shape == tuple(ref.shape) and out.dtype.name == str(ref.dtype)[6:]
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    assert sf.zeros(0, 3).sum(0).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("fn,op", [
    (lambda t: t.max(0), "max"), (lambda t: t.min(0), "min"), (lambda t: t.amax(0), "amax"),
    (lambda t: t.amin((0, 1)), "amin"), (lambda t: t.argmax(0), "argmax"),
    (lambda t: t.max(), "max"), (lambda t: t.argmin(), "argmin"), (lambda t: t.amax(), "amax"),
    (lambda t: t.norm(math.inf, 0), "amax"),
])
def test_max_over_an_empty_dim_raises_shape_error(fn, op):
    with pytest.raises((IndexError, RuntimeError)):
        fn(torch.zeros(0, 3))
    for device in ("cpu", "meta"):
        with pytest.raises(sf.ShapeError) as e:
            fn(sf.zeros(0, 3, device=device))
        assert e.value.op == op and f"{op}()" in str(e.value) and "[0, 3]" in str(e.value)


@pytest.mark.parametrize("fn,op", [
    (lambda t: t.sum(2), "sum"), (lambda t: t.mean(-3), "mean"), (lambda t: t.prod(5), "prod"),
    (lambda t: t.amax((0, 2)), "amax"), (lambda t: t.max(2), "max"),
    (lambda t: t.argmax(-3), "argmax"), (lambda t: t.var(2), "var"), (lambda t: t.std(9), "std"),
    (lambda t: t.logsumexp(2), "logsumexp"), (lambda t: t.cumsum(2), "cumsum"),
    (lambda t: t.all(2), "all"), (lambda t: t.any((0, 0)), "any"), (lambda t: t.norm(dim=3),
                                                                   "norm"),
    (lambda t: t.sum((1, -1)), "sum"),
])
def test_bad_dims_raise_shape_error_with_op_and_shape(fn, op):
    with pytest.raises(sf.ShapeError) as e:
        fn(sf.ones(2, 3))
    assert e.value.op == op and str(e.value).startswith(op) and "[2, 3]" in str(e.value)


def test_cumsum_needs_a_dim():
    with pytest.raises(TypeError):
        sf.ones(3).cumsum()
    with pytest.raises(sf.ShapeError, match="int"):
        sf.ones(2, 3).cumsum((0, 1))


# ---- var / std -----------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda m, x: m.var(x, 0, True, True), lambda m, x: m.var(x, 1, unbiased=False),
    lambda m, x: m.var(x, False), lambda m, x: m.std(x, True), lambda m, x: m.var(x, correction=2),
    lambda m, x: m.std(x, dim=(0, 1), correction=0, keepdim=True),
    lambda m, x: m.var(x, dim=-1, correction=3),
])
def test_var_std_signatures(call):
    data = normal((2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # correction=3 over 3 elements: inf, as in PyTorch
        check_op(lambda x: call(sf, x), lambda x: call(torch, x), data, gradcheck=False)


def test_var_rejects_unbiased_with_correction():
    with pytest.raises(ValueError):
        sf.ones(3).var(unbiased=True, correction=0)


# ---- logsumexp -----------------------------------------------------------------------------
def test_logsumexp_is_stable():
    data = np.array([[1000.0, 1000.0, -1000.0], [-np.inf, -np.inf, -np.inf],
                     [np.inf, 0.0, 1.0], [-1e4, -1e4 + 1, -1e4 + 2]], dtype=np.float32)
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        out = sf.from_numpy(data).logsumexp(1)
    ref = torch.from_numpy(data).logsumexp(1)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    big = np.array([[500.0, 499.0], [-500.0, -501.0]])
    check_op(lambda x: x.logsumexp(-1), lambda x: x.logsumexp(-1), big, rtol=1e-6, atol=1e-4)


# ---- prod with zeros ---------------------------------------------------------------------
@pytest.mark.parametrize("data", [
    [[2.0, 0.0, 3.0], [1.0, 4.0, 0.5]], [[0.0, 0.0, 3.0], [0.0, 4.0, 0.5]],
    [[0.0, 2.0], [3.0, 0.0]], [[0.0]],
], ids=["one-zero", "two-zeros", "diag-zeros", "single-zero"])
@pytest.mark.parametrize("dim", [None, 0, -1])
def test_prod_gradient_with_zeros(data, dim):
    fn = (lambda x: x.prod()) if dim is None else (lambda x: x.prod(dim))
    check_op(fn, fn, np.array(data), gradcheck=False)


# ---- cumsum / all / any / norm ------------------------------------------------------------
def test_cumsum_float16_and_ints():
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    assert sf.from_numpy(x).cumsum(-1).tolist() == torch.from_numpy(x).cumsum(-1).tolist()
    check_op(lambda t: t.cumsum(-1), lambda t: t.cumsum(-1), normal((2, 1, 4)))


def test_all_any_values():
    data = np.array([[0.0, 1.0, 2.0], [3.0, 0.5, -1.0]])
    for fn in (lambda t: t.all(), lambda t: t.any(0), lambda t: t.all(1, keepdim=True),
               lambda t: sf.any(t, (0, 1)) if isinstance(t, sf.Tensor) else t.any()):
        out, ref = fn(sf.tensor(data)), fn(torch.tensor(data))
        assert out.dtype is sf.bool
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    x = sf.tensor(data, requires_grad=True)
    assert not x.any().requires_grad


@pytest.mark.parametrize("p", [2, "fro", 1, 3, 0.5, math.inf, -math.inf, 0])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
def test_norm_orders(p, dim):
    check_op(lambda x: x.norm(p, dim), lambda x: x.norm(p, dim), normal((2, 3)),
             grad=p != 0, gradcheck=p not in (0.5,))


@pytest.mark.parametrize("p", [2, 3, 1, math.inf])
def test_norm_gradient_at_zero_is_zero(p):
    data = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])
    check_op(lambda x: x.norm(p, 1), lambda x: x.norm(p, 1), data, gradcheck=False)


def test_norm_rejects_an_unknown_string():
    with pytest.raises(ValueError):
        sf.ones(2, 2).norm("bogus")


# ---- grad of grad ----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x: x.var(1), lambda x: x.logsumexp(0), lambda x: x.prod(1), lambda x: x.amax(1),
    lambda x: x.cumsum(1), lambda x: x.norm(dim=1), lambda x: x.norm(3, 1), lambda x: x.std(),
    lambda x: x.max(1)[0], lambda x: x.mean(0),
], ids=["var", "logsumexp", "prod", "amax", "cumsum", "norm", "norm3", "std", "max_dim", "mean"])
def test_grad_of_grad(fn):
    data = normal((2, 3))
    xs = sf.tensor(data, requires_grad=True)
    xt = torch.tensor(data, requires_grad=True)
    (gs,) = sf.autograd.grad((fn(xs) ** 2).sum(), xs, create_graph=True)
    (gt,) = torch.autograd.grad((fn(xt) ** 2).sum(), xt, create_graph=True)
    np.testing.assert_allclose(gs.detach().numpy(), gt.detach().numpy(), rtol=1e-6, atol=1e-9)
    (ggs,) = sf.autograd.grad((gs * gs).sum(), xs)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(ggs.numpy(), ggt.numpy(), rtol=1e-6, atol=1e-9)


# ---- Hypothesis: random shapes and dims -----------------------------------------------------
HYP_OPS = ["sum", "mean", "prod", "amax", "amin", "var0", "std_biased", "logsumexp", "norm"]


@st.composite
def shape_and_dims(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    n = len(shape)
    if n == 0:
        dim = draw(st.sampled_from([None, 0, -1]))
    else:
        kind = draw(st.sampled_from(["none", "int", "tuple"]))
        if kind == "none":
            dim = None
        elif kind == "int":
            dim = draw(st.integers(-n, n - 1))
        else:
            picked = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
            dim = tuple(d - n if draw(st.booleans()) else d for d in picked)
    return shape, dim


@given(shape_and_dims(), st.sampled_from(HYP_OPS), st.booleans())
def test_reductions_hypothesis(shape_dim, name, keepdim):
    shape, dim = shape_dim
    sf_fn, t_fn, _, _ = OPS[name]
    check_op(lambda x: sf_fn(x, dim, keepdim), lambda x: t_fn(x, dim, keepdim), normal(shape),
             gradcheck=False)


@given(shape_and_dims(), st.sampled_from(["max", "min", "argmax", "argmin", "cumsum"]),
       st.booleans())
def test_single_dim_reductions_hypothesis(shape_dim, name, keepdim):
    shape, dim = shape_dim
    if not isinstance(dim, int):
        dim = 0
    data = normal(shape)
    if name == "cumsum":
        check_op(lambda x: x.cumsum(dim), lambda x: x.cumsum(dim), data, gradcheck=False)
    elif name in ("max", "min"):
        check_op(lambda x: tuple(getattr(x, name)(dim, keepdim)),
                 lambda x: tuple(getattr(x, name)(dim, keepdim)), data, gradcheck=False)
    else:
        check_op(lambda x: getattr(x, name)(dim, keepdim),
                 lambda x: getattr(x, name)(dim, keepdim), data, grad=False)


# ---- symbolic sizes on the meta device --------------------------------------------------
@pytest.mark.parametrize("fn,shape", [
    (lambda t: t.sum(1), ["B", 4]), (lambda t: t.mean((0, 1)), ["B", 4]),
    (lambda t: t.max(1)[0], ["B", 4]), (lambda t: t.cumsum(1), ["B", "L", 4]),
    (lambda t: t.sum(), ["B", "L", 4]), (lambda t: t.amax(1, keepdim=True), ["B", 4]),
], ids=["sum", "mean", "max_dim", "cumsum", "sum_all", "amax_keepdim"])
def test_symbolic_sizes(fn, shape):
    symbolic = pytest.importorskip("shapeflow.symbolic")
    shape = [symbolic.Dim(s) if isinstance(s, str) else s for s in shape]
    x = sf.empty(*shape, device="meta", requires_grad=True)
    out = fn(x)
    assert out.device == "meta"
    out.sum().backward()
    assert len(x.grad.shape) == len(shape)
    assert x.argmax(0).shape == tuple(shape[1:])
