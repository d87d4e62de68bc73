"""Issue 35: ops that disagreed with PyTorch (kwargs refused, wrong sizes or dtypes, 0-size
batches); each case is compared with PyTorch."""

import numpy as np
import pytest

import shapeflow as sf
import shapeflow.nn.functional as F

torch = pytest.importorskip("torch")


def _same(s: sf.Tensor, t) -> None:
    """Same shape, dtype and values (float tolerance) as PyTorch's result."""
    assert tuple(s.shape) == tuple(t.shape)
    assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-6)


def _pair(a: np.ndarray):
    """The same float64 leaf in shapeflow and PyTorch."""
    return sf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _grads_match(s_out, t_out, s_leaves, t_leaves, seed: int = 0) -> None:
    g = np.random.default_rng(seed).normal(size=tuple(t_out.shape))
    s_out.backward(sf.tensor(g))
    t_out.backward(torch.tensor(g))
    for s, t in zip(s_leaves, t_leaves):
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty", "new_full"])
@pytest.mark.parametrize("dtype", ["int64", "bool", "float64"])
def test_new_factories_take_dtype(name, dtype):
    s, t = sf.ones(2, 3), torch.ones(2, 3)
    args = ((2, 4), 1) if name == "new_full" else ((2, 4),)
    so = getattr(s, name)(*args, dtype=getattr(sf, dtype), requires_grad=dtype == "float64")
    to = getattr(t, name)(*args, dtype=getattr(torch, dtype), requires_grad=dtype == "float64")
    assert tuple(so.shape) == tuple(to.shape) and so.requires_grad == to.requires_grad
    assert str(so.dtype).split(".")[-1] == dtype
    if name != "new_empty":
        _same(so, to)


@pytest.mark.parametrize("args", [(3.1,), (0, 5, 1.5), (-2.5, 3.7), (0.9,)])
def test_arange_truncates_float_bounds_for_int64(args):
    _same(sf.arange(*args, dtype=sf.int64), torch.arange(*args, dtype=torch.int64))


def test_arange_step_truncated_to_zero_is_refused():
    with pytest.raises(ValueError):
        torch.arange(0, 3, 0.5, dtype=torch.int64)
    with pytest.raises(sf.errors.ShapeflowError, match="arange"):
        sf.arange(0, 3, 0.5, dtype=sf.int64)


@pytest.mark.parametrize("kw", [dict(append=[5.0]), dict(prepend=[0.0])])
def test_diff_n0_returns_the_input(kw):
    x = np.array([1.0, 2.0, 4.0])
    skw = {k: sf.tensor(v) for k, v in kw.items()}
    tkw = {k: torch.tensor(v) for k, v in kw.items()}
    _same(sf.diff(sf.tensor(x), n=0, **skw), torch.diff(torch.tensor(x), n=0, **tkw))


@pytest.mark.parametrize("dim", [None, 0, 1])
@pytest.mark.parametrize("src,dtype", [("bool", "bool"), ("float32", "bool"),
                                       ("int32", "int32"), ("int64", "uint8")])
def test_prod_result_has_the_requested_dtype(dim, src, dtype):
    x = np.array([[1, 0, 3], [2, 1, 1]]).astype(src)
    args = () if dim is None else (dim,)
    _same(sf.prod(sf.tensor(x), *args, dtype=getattr(sf, dtype)),
          torch.prod(torch.tensor(x), *args, dtype=getattr(torch, dtype)))


@pytest.mark.parametrize("decimals", [0, 1, 2, 3, -1, -2])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_decimals(decimals, dtype):
    x = np.random.default_rng(0).normal(0, 100, 200).astype(dtype)
    s, t = sf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    so, to = sf.round(s, decimals=decimals), torch.round(t, decimals=decimals)
    np.testing.assert_array_equal(so.detach().numpy(), to.detach().numpy())
    _same(s.round(decimals=decimals), t.round(decimals=decimals))
    so.sum().backward()
    to.sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), t.grad.numpy())


def test_round_decimals_refuses_integers_as_pytorch():
    with pytest.raises(NotImplementedError):
        torch.round(torch.tensor([15, 25]), decimals=1)
    with pytest.raises(sf.errors.DTypeError, match="round"):
        sf.round(sf.tensor([15, 25]), decimals=1)


@pytest.mark.parametrize("other", ["tensor", 2.5])
def test_rsub_alpha(other):
    a = np.array([1.0, -2.0, 3.5])
    sa, ta = _pair(a)
    so_, to_ = (_pair(np.array([3.0, 4.0, 5.0])) if other == "tensor" else (other, other))
    so, to = sf.rsub(sa, so_, alpha=2), torch.rsub(ta, to_, alpha=2)
    _same(so, to)
    leaves = [(sa, ta)] + ([(so_, to_)] if other == "tensor" else [])
    _grads_match(so, to, [s for s, _ in leaves], [t for _, t in leaves])
    _same(sf.rsub(sf.tensor([1, 2]), 5, alpha=2), torch.rsub(torch.tensor([1, 2]), 5, alpha=2))


@pytest.mark.parametrize("p,dim", [(-1, None), (-2, None), (-0.5, 1), (-1, 0), ("nuc", None),
                                   ("nuc", (1, 0))])
def test_norm_negative_p_and_nuc(p, dim):
    x = np.random.default_rng(1).normal(size=(3, 4))
    s, t = _pair(x)
    so, to = sf.norm(s, p, dim), torch.norm(t, p, dim)
    _same(so, to)
    _grads_match(so, to, [s], [t])
    _same(sf.tensor(x, dtype=sf.float32).norm(p, dim), torch.tensor(x).float().norm(p, dim))


@pytest.mark.parametrize("si,st,sv", [((4, 3), (4, 1), (4, 3)), ((4, 3), (3,), (4,)),
                                      ((2, 3, 5), (2, 1, 5), (2, 1, 5)),
                                      ((2, 3, 5), (5,), (2, 3))])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_gaussian_nll_loss_broadcasts_target(si, st, sv, reduction):
    rng = np.random.default_rng(2)
    pairs = [_pair(rng.normal(size=si)), _pair(rng.normal(size=st)),
             _pair(rng.uniform(0.5, 2.0, size=sv))]
    so = F.gaussian_nll_loss(*(s for s, _ in pairs), reduction=reduction)
    to = torch.nn.functional.gaussian_nll_loss(*(t for _, t in pairs), reduction=reduction)
    _same(so, to)
    _grads_match(so, to, [s for s, _ in pairs], [t for _, t in pairs])


@pytest.mark.parametrize("kw", [dict(size=(8, 11)), dict(size=(3, 4)), dict(scale_factor=2.0),
                                dict(scale_factor=(1.5, 0.7)),
                                dict(size=(9, 2), align_corners=True),
                                dict(scale_factor=1.7, recompute_scale_factor=True)])
def test_interpolate_bicubic(kw):
    x = np.random.default_rng(3).normal(size=(2, 3, 5, 7))
    s, t = _pair(x)
    so = F.interpolate(s, mode="bicubic", **kw)
    to = torch.nn.functional.interpolate(t, mode="bicubic", **kw)
    _same(so, to)
    _grads_match(so, to, [s], [t])
    x32 = x.astype(np.float32)
    _same(F.interpolate(sf.tensor(x32), mode="bicubic", **kw),
          torch.nn.functional.interpolate(torch.tensor(x32), mode="bicubic", **kw))


@pytest.mark.parametrize("kw", [dict(size=(3, 4, 2)), dict(size=(8, 7, 9)),
                                dict(scale_factor=0.5), dict(size=(5, 3, 4))])
def test_interpolate_area_three_spatial_dims(kw):
    x = np.random.default_rng(4).normal(size=(2, 3, 5, 7, 4))
    s, t = _pair(x)
    so = F.interpolate(s, mode="area", **kw)
    to = torch.nn.functional.interpolate(t, mode="area", **kw)
    _same(so, to)
    _grads_match(so, to, [s], [t])


_LINALG = {
    "eigh": (lambda m: m.linalg.eigh, (0, 5, 5)),
    "eigvalsh": (lambda m: m.linalg.eigvalsh, (0, 5, 5)),
    "svd": (lambda m: m.linalg.svd, (0, 5, 5)),
    "svd_reduced": (lambda m: lambda a: m.linalg.svd(a, full_matrices=False), (0, 4, 6)),
    "eigh_empty_matrix": (lambda m: m.linalg.eigh, (2, 0, 0)),
    "svdvals_no_grad": (lambda m: m.linalg.svdvals, (0, 3, 5)),
    "matrix_rank": (lambda m: m.linalg.matrix_rank, (0, 5, 5)),
}


@pytest.mark.parametrize("name", list(_LINALG))
def test_linalg_zero_size_batches(name):
    fn, shape = _LINALG[name]
    grad = name not in ("matrix_rank", "svdvals_no_grad")
    s = sf.zeros(*shape, dtype=sf.float64, requires_grad=grad)
    t = torch.zeros(shape, dtype=torch.float64, requires_grad=grad)
    so, to = fn(sf)(s), fn(torch)(t)
    so = so if isinstance(so, tuple) else (so,)
    to = to if isinstance(to, tuple) else (to,)
    assert len(so) == len(to)
    for a, b in zip(so, to):
        _same(a, b)
    if grad:
        sum(o.sum() for o in so).backward()
        sum(o.sum() for o in to).backward()
        _same(s.grad, t.grad)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sign_of_nan_is_zero(dtype):
    a = np.array([np.nan, -2.0, 0.0, 3.0, -np.inf], dtype=dtype)
    _same(sf.sign(sf.tensor(a)), torch.sign(torch.tensor(a)))


_SPECIAL_ALIASES = [
    ("i0", lambda m, x: m.i0(x)),
    ("polygamma", lambda m, x: m.polygamma(2, x)),
    ("mvlgamma", lambda m, x: m.mvlgamma(x + 1, 3)),
    ("igamma", lambda m, x: m.igamma(x, x + 0.5)),
    ("igammac", lambda m, x: m.igammac(x, x + 0.5)),
    ("i0 method", lambda m, x: x.i0()),
    ("polygamma method", lambda m, x: x.polygamma(1)),
    ("mvlgamma method", lambda m, x: (x + 1).mvlgamma(2)),
    ("igamma method", lambda m, x: x.igamma(x * 2)),
]


@pytest.mark.parametrize("name,call", _SPECIAL_ALIASES, ids=[n for n, _ in _SPECIAL_ALIASES])
def test_top_level_special_names(name, call):
    """torch.i0 / polygamma / mvlgamma / igamma / igammac and their Tensor methods."""
    a = np.array([0.3, 1.0, 2.5, 4.0])
    _same(call(sf, sf.tensor(a)), call(torch, torch.tensor(a)))


def test_sign_of_a_0d_tensor_and_its_users():
    """sign on 0-d data (l1_loss's backward calls it on a 0-d difference)."""
    _same(sf.sign(sf.tensor(float("nan"))), torch.sign(torch.tensor(float("nan"))))
    s, t = _pair(np.array(1.5))
    _grads_match(F.l1_loss(s, sf.tensor(0.5, dtype=sf.float64)),
                 torch.nn.functional.l1_loss(t, torch.tensor(0.5, dtype=torch.float64)), [s], [t])
