"""Issue 35's everyday ops (nanmean ... triu_indices) against PyTorch: values, dtypes, shapes,
float64 gradients, meta shapes, and shapeflow's errors for bad input."""

import numpy as np
import pytest

import shapeflow as sf

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(35)
NAN = float("nan")


def _data(*shape):
    return _RNG.standard_normal(shape)


def _with_nans():
    a = _data(3, 5)
    a[0, 1] = a[1, 3] = a[1, 4] = NAN
    return a


A, B, N = _data(3, 5), _data(3, 5), _with_nans()
A3, V = _data(2, 3, 4), _data(6)
ANGLES = np.array([-1.5, 0.0, -0.0, 2.0, 180.0])
SPECIAL = np.array([1.0, -0.0, 0.0, -np.inf, np.inf, NAN, -2.5])
Q = np.array([0.1, 0.5, 0.75])

# (name, inputs, kwargs, differentiable): inputs are arrays (tensors) or other values
CASES = [
    ("nanmean", (N,), {"dim": 1}, True),
    ("nanmean", (N,), {}, True),
    ("nansum", (N,), {"dim": (0, 1), "keepdim": True}, True),
    ("nansum", (np.arange(6).reshape(2, 3),), {"dim": 0}, False),
    ("median", (A,), {}, True),
    ("median", (A,), {"dim": 1}, True),
    ("median", (A,), {"dim": 0, "keepdim": True}, True),
    ("median", (N,), {"dim": 1}, False),
    ("nanmedian", (N,), {"dim": 1}, True),
    ("nanmedian", (N,), {}, True),
    ("mode", (np.array([[1.0, 2, 2, 3, 1, 5], [4, 4, 1, 1, 7, 7]]),), {"dim": 1}, True),
    ("mode", (np.array([[3, 3, 1], [2, 1, 1]]),), {"dim": 0, "keepdim": True}, False),
    ("quantile", (A, 0.3), {"dim": 1}, True),
    ("quantile", (A, Q), {"dim": 0, "keepdim": True}, True),
    ("quantile", (A, Q), {}, True),
    ("quantile", (N, 0.5), {"dim": 1}, False),
    *[("quantile", (A, Q), {"dim": 1, "interpolation": m}, True)
      for m in ("lower", "higher", "midpoint", "nearest")],
    ("nanquantile", (N, Q), {"dim": 1}, True),
    ("nanquantile", (N, 0.4), {"dim": 1, "interpolation": "midpoint"}, True),
    ("count_nonzero", (np.array([[0, 1, 2], [0, 0, 3]]),), {}, False),
    ("count_nonzero", (np.array([[0.0, 1, 2], [0, 0, 3]]),), {"dim": 1}, False),
    ("bincount", (np.array([1, 3, 1, 0]),), {}, False),
    ("bincount", (np.array([1, 3, 1]), np.array([0.5, 1.0, 2.0])), {"minlength": 6}, False),
    ("aminmax", (A,), {}, True),
    ("aminmax", (A,), {"dim": 1, "keepdim": True}, True),
    ("cov", (A,), {}, True),
    ("cov", (A,), {"correction": 0, "aweights": np.arange(1.0, 6)}, True),
    ("cov", (A,), {"fweights": np.array([1, 2, 1, 3, 1]), "aweights": np.arange(1.0, 6)}, True),
    ("cov", (V,), {}, True),
    ("corrcoef", (A,), {}, True),
    ("hstack", ([V, V],), {}, True),
    ("hstack", ([A, B],), {}, True),
    ("vstack", ([V, V],), {}, True),
    ("vstack", ([A, B],), {}, True),
    ("dstack", ([A, B],), {}, True),
    ("dstack", ([V, V],), {}, True),
    ("column_stack", ([V, _data(6, 2)],), {}, True),
    ("atleast_1d", (np.array(2.0),), {}, True),
    ("atleast_2d", (V,), {}, True),
    ("atleast_3d", (A,), {}, True),
    ("atleast_3d", (V,), {}, True),
    ("hsplit", (A3, 3), {}, True),
    ("vsplit", (A3, [1]), {}, True),
    ("dsplit", (A3, [1, 3]), {}, True),
    ("tensor_split", (A, 3), {"dim": 1}, True),
    ("tensor_split", (A, [1, -1, 9]), {"dim": 1}, True),
    ("split_with_sizes", (A, [1, 3, 1]), {"dim": 1}, True),
    ("ravel", (A3,), {}, True),
    ("reshape_as", (A3, np.zeros((4, 6))), {}, True),
    ("flipud", (A,), {}, True),
    ("fliplr", (A3,), {}, True),
    ("fmax", (np.array([1.0, NAN, 3, NAN, 2]), np.array([2.0, 1, NAN, NAN, 2])), {}, True),
    ("fmin", (np.array([1.0, NAN, 3, NAN, 2]), np.array([2.0, 1, NAN, NAN, 2])), {}, True),
    ("fmax", (A, B[:1]), {}, True),
    ("fmin", (np.array([1, 5]), np.array([2.5, 0.5])), {}, False),
    ("float_power", (np.abs(A) + 0.5, B), {}, True),
    ("float_power", (np.array([1, 2, 3]), 2), {}, False),
    ("isin", (np.array([[1, 2], [3, 4]]), np.array([2, 3, 9])), {}, False),
    ("isin", (np.array([1.0, 2, 3]), 2.0), {"invert": True}, False),
    ("isneginf", (SPECIAL,), {}, False),
    ("isposinf", (SPECIAL,), {}, False),
    ("signbit", (SPECIAL,), {}, False),
    ("deg2rad", (ANGLES,), {}, True),
    ("deg2rad", (np.array([180, -90]),), {}, False),
    ("rad2deg", (ANGLES,), {}, True),
    ("sgn", (SPECIAL,), {}, False),
    ("sgn", (A,), {}, True),
    ("positive", (A,), {}, True),
]
FACTORIES = [
    ("logspace", (0, 3, 4), {}),
    ("logspace", (-1.0, 2.0, 7), {"base": 2.0, "dtype": "float64"}),
    ("logspace", (0, 3, 4), {"base": 2, "dtype": "int64"}),
    ("tril_indices", (4, 3), {}),
    ("tril_indices", (3, 5, -1), {}),
    ("triu_indices", (4, 3, 1), {}),
    ("triu_indices", (3, 5), {"dtype": "int32"}),
]


def _leaves(args, kwargs, lib, grad):
    """args/kwargs with arrays (also inside lists) as lib tensors, and the float leaves (not
    quantile's q: shapeflow gives q no gradient)."""
    make = sf.tensor if lib == "sf" else torch.tensor
    leaves = []

    def conv(v, grad=grad):
        if isinstance(v, list) and v and isinstance(v[0], np.ndarray):
            return [conv(x) for x in v]
        if not isinstance(v, np.ndarray):
            return v
        t = make(v)
        if grad and v.dtype.kind == "f":
            t.requires_grad_(True)
            leaves.append(t)
        return t

    return ([conv(a, grad and not (i and a is Q)) for i, a in enumerate(args)],
            {k: conv(v) for k, v in kwargs.items()}, leaves)


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


def _np(t):
    return t.detach().numpy(force=True) if isinstance(t, torch.Tensor) else t.detach().numpy()


def _call(lib, name, args, kwargs):
    """lib.name(*args), or the method args[0].name(...) where PyTorch has only that."""
    fn = getattr(torch, name, None) if lib == "torch" else getattr(sf, name, None)
    return fn(*args, **kwargs) if fn else getattr(args[0], name)(*args[1:], **kwargs)


@pytest.mark.parametrize("name,args,kwargs,diff", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_values_dtypes_shapes_and_gradients_match_pytorch(name, args, kwargs, diff):
    sa, sk, s_leaves = _leaves(args, kwargs, "sf", diff)
    ta, tk, t_leaves = _leaves(args, kwargs, "torch", diff)
    got, want = _flat(_call("sf", name, sa, sk)), _flat(_call("torch", name, ta, tk))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype) == str(w.dtype).split(".")[1]
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-6, atol=1e-12, equal_nan=True)
    if not diff:
        return
    # d(sum(out * weights))/d(inputs), the same weights for both, over the float outputs
    s_loss, t_loss = 0, 0
    for g, w in zip(got, want):
        if w.dtype.is_floating_point:
            wts = _RNG.standard_normal(tuple(w.shape))
            wts[np.isnan(_np(w))] = 0.0
            s_loss = s_loss + sf.nansum(g * sf.tensor(wts))
            t_loss = t_loss + torch.nansum(w * torch.tensor(wts))
    s_grads = sf.autograd.grad(s_loss, s_leaves, allow_unused=True)
    t_grads = torch.autograd.grad(t_loss, t_leaves, allow_unused=True)
    for sg, tg in zip(s_grads, t_grads):
        if tg is None:
            assert sg is None or not _np(sg).any()
        else:
            np.testing.assert_allclose(_np(sg), _np(tg), rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("name,args,kwargs,diff", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_meta_gives_the_shapes_and_dtypes_of_cpu(name, args, kwargs, diff):
    if name == "bincount":  # its size is in the values: meta refuses it, as PyTorch's meta
        with pytest.raises(sf.DeviceError, match="bincount"):
            sf.bincount(sf.tensor(args[0]).to("meta"))
        return
    sa, sk, _ = _leaves(args, kwargs, "sf", False)

    def to_meta(v):
        if isinstance(v, list):
            return [to_meta(x) for x in v]
        return v.to("meta") if isinstance(v, sf.Tensor) else v

    cpu = _flat(_call("sf", name, sa, sk))
    on_meta = _flat(_call("sf", name, [to_meta(a) for a in sa],
                          {k: to_meta(v) for k, v in sk.items()}))
    assert [(tuple(t.shape), t.dtype, t.device.type) for t in on_meta] == \
        [(tuple(t.shape), t.dtype, "meta") for t in cpu]


@pytest.mark.parametrize("name,args,kwargs", FACTORIES)
def test_factories_match_pytorch(name, args, kwargs):
    got = getattr(sf, name)(*args, **{k: getattr(sf, v) if k == "dtype" else v
                                      for k, v in kwargs.items()})
    want = getattr(torch, name)(*args, **{k: getattr(torch, v) if k == "dtype" else v
                                          for k, v in kwargs.items()})
    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype) == str(want.dtype)[6:]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    on_meta = getattr(sf, name)(*args, device="meta", **{
        k: getattr(sf, v) if k == "dtype" else v for k, v in kwargs.items()})
    assert tuple(on_meta.shape) == tuple(got.shape) and on_meta.dtype is got.dtype


def test_tensor_methods_are_the_functions():
    x = sf.tensor(A)
    assert x.median(1).indices.tolist() == torch.tensor(A).median(1).indices.tolist()
    assert x.nanmean().item() == pytest.approx(A.mean())
    assert x.quantile(0.5, 1).shape == (3,) and x.count_nonzero().item() == 15
    assert [p.shape for p in x.tensor_split(2, 1)] == [(3, 3), (3, 2)]
    assert x.ravel().shape == (15,) and x.fliplr().tolist() == A[:, ::-1].tolist()
    assert x.fmax(x).tolist() == A.tolist() and x.signbit().tolist() == (A < 0).tolist()
    assert x.cov().shape == (3, 3) and x.aminmax().max.item() == A.max()


@pytest.mark.parametrize("call,error,match", [
    (lambda: sf.quantile(sf.tensor(A), 1.5), sf.ShapeflowError, "q must be in the range"),
    (lambda: sf.quantile(sf.tensor(A), 0.5, interpolation="cubic"), sf.ShapeflowError,
     "interpolation"),
    (lambda: sf.quantile(sf.tensor([1, 2]), 0.5), sf.DTypeError, "floating point"),
    (lambda: sf.quantile(sf.tensor(A), sf.tensor([0.5], dtype=sf.float32)), sf.DTypeError,
     "q must have"),
    (lambda: sf.nanmean(sf.tensor([1, 2])), sf.DTypeError, "nanmean"),
    (lambda: sf.median(sf.tensor(A), 2), sf.ShapeError, "median"),
    (lambda: sf.bincount(sf.tensor([[1, 2]])), sf.ShapeError, "1-d integer"),
    (lambda: sf.bincount(sf.tensor([1, -2])), sf.ShapeflowError, "negative"),
    (lambda: sf.cov(sf.tensor(A3)), sf.ShapeError, "cov"),
    (lambda: sf.hsplit(sf.tensor(A), 2), sf.ShapeError, "divisible"),
    (lambda: sf.vsplit(sf.tensor(V), 2), sf.ShapeError, "at least 2 dims"),
    (lambda: sf.split_with_sizes(sf.tensor(A), [1, 1], 1), sf.ShapeError, "add up to"),
    (lambda: sf.fliplr(sf.tensor(V)), sf.ShapeError, "fliplr"),
    (lambda: sf.hstack([]), sf.ShapeError, "non-empty"),
    (lambda: sf.positive(sf.tensor([True])), sf.DTypeError, "bool"),
    (lambda: sf.tril_indices(3, 3, dtype=sf.float32), sf.DTypeError, "integer dtype"),
])
def test_bad_input_raises_shapeflow_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
