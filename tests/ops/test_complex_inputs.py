"""Every unary and binary op of the registry on complex128 input, against PyTorch: where torch
answers, shapeflow gives the same dtype, shape and values (to 1e-10); where torch refuses,
shapeflow raises one of its own errors (never a raw NumPy or Python TypeError)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import shapeflow as sf
import shapeflow.nn.functional as F
import shapeflow.special as S
from shapeflow.errors import DTypeError, ShapeflowError
from shapeflow.ops import registry

_RNG = np.random.default_rng(35)
Z = _RNG.standard_normal((4, 4)) + 1j * _RNG.standard_normal((4, 4))
W = _RNG.standard_normal((4, 4)) + 1j * _RNG.standard_normal((4, 4))
_REAL = torch.tensor(_RNG.standard_normal((4, 4)))

# not swept: factories and random draws (no input to compare on), a different torch overload
SKIP = {"where",  # torch.where(cond) is nonzero(as_tuple=True); sf.where takes 3 tensors
        "normal", "bernoulli", "poisson", "multinomial", "dropout", "pca_lowrank",
        "svd_lowrank", "rand_like", "randn_like", "randint_like", "empty_like", "geqrf"}

# torch supports complex here; shapeflow refuses with a DTypeError naming the dtype (its
# LAPACK-backed linalg, losses and linear layers take real floats only so far)
NOT_YET = {
    "sf": {"logcumsumexp", "cholesky_inverse", "cholesky_solve", "det", "inverse", "logdet", "lu",
           "matrix_exp", "pairwise_distance", "pinverse", "qr", "slogdet", "svd",
           "triangular_solve"},
    "F": {"l1_loss", "linear", "pairwise_distance", "poisson_nll_loss"},
    "special": set(),
}

# ops that need more than tensors: how to call them (m is torch or shapeflow's module)
CALLS = {
    ("sf", "softmax"): lambda m, z, w: m.softmax(z, 0),
    ("sf", "log_softmax"): lambda m, z, w: m.log_softmax(z, 1),
    ("sf", "logsumexp"): lambda m, z, w: m.logsumexp(z, 0),
    ("sf", "cumsum"): lambda m, z, w: m.cumsum(z, 1),
    ("sf", "cumprod"): lambda m, z, w: m.cumprod(z, 0),
    ("sf", "logcumsumexp"): lambda m, z, w: m.logcumsumexp(z, 1),
    ("sf", "cummax"): lambda m, z, w: m.cummax(z, 0),
    ("sf", "kthvalue"): lambda m, z, w: m.kthvalue(z, 2),
    ("sf", "topk"): lambda m, z, w: m.topk(z, 2),
    ("sf", "quantile"): lambda m, z, w: m.quantile(z, 0.5),
    ("sf", "fmod_number"): lambda m, z, w: m.fmod(z, 1.5),
    ("sf", "bucketize"): lambda m, z, w: m.bucketize(z, w[0]),
    ("sf", "lerp"): lambda m, z, w: m.lerp(z, w, 0.3),
    ("sf", "addcmul"): lambda m, z, w: m.addcmul(z, w, z, value=2),
    ("sf", "addcdiv"): lambda m, z, w: m.addcdiv(z, w, z + 3, value=2),
    ("sf", "dot"): lambda m, z, w: m.dot(z[0], w[1]),
    ("sf", "vdot"): lambda m, z, w: m.vdot(z[0], w[1]),
    ("sf", "outer"): lambda m, z, w: m.outer(z[0], w[1]),
    ("sf", "mv"): lambda m, z, w: m.mv(z, w[1]),
    ("sf", "matmul"): lambda m, z, w: m.matmul(z, w),
    ("sf", "mm"): lambda m, z, w: m.mm(z, w),
    ("sf", "nan_to_num"): lambda m, z, w: m.nan_to_num(
        z.masked_fill(z.real > 1, complex("nan+1j")).masked_fill(z.imag > 1, complex("inf-infj"))),
    ("sf", "float_power_number"): lambda m, z, w: m.float_power(z, 2),
    ("sf", "var_dim"): lambda m, z, w: m.var(z, 1, correction=0),
    ("sf", "std_dim"): lambda m, z, w: m.std(z, 0, keepdim=True),
    ("sf", "norm_1"): lambda m, z, w: m.norm(z, 1, dim=1),
    ("sf", "norm_inf"): lambda m, z, w: m.norm(z, float("inf")),
    ("sf", "dist_3"): lambda m, z, w: m.dist(z, w, 3),
    ("sf", "cov_weighted"): lambda m, z, w: m.cov(z, fweights=m.tensor([1, 2, 1, 3]),
                                                  aweights=m.tensor([0.5, 1.0, 2.0, 1.0],
                                                                           dtype=m.float64)),
    ("sf", "gradient_spacing"): lambda m, z, w: m.gradient(z, spacing=2.0, dim=1,
                                                           edge_order=2),
    ("F", "softmax"): lambda m, z, w: m.nn.functional.softmax(z, 0),
    ("F", "log_softmax"): lambda m, z, w: m.nn.functional.log_softmax(z, 1),
    ("F", "normalize"): lambda m, z, w: m.nn.functional.normalize(z),
    ("F", "glu"): lambda m, z, w: m.nn.functional.glu(z),
}


def _modules(space: str, m):
    if space == "sf":
        return m
    return m.nn.functional if space == "F" else m.special


def _tables() -> dict[str, dict]:
    special = {n: getattr(S, n) for n in dir(S)
               if not n.startswith("_") and callable(getattr(S, n))}
    return {"sf": registry.namespace("sf"), "F": registry.namespace("functional"),
            "special": special}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(
            torch.equal(a, b) or torch.allclose(a, b, equal_nan=True))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _arity(fn) -> int | None:
    """How many tensors torch's op takes (1 or 2, tried on real float64 input), None for
    neither or for a random one (two calls on the same input differ)."""
    for n in (1, 2):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # two seeds, the same in every process: xdist's workers must collect alike
                torch.manual_seed(0)
                first = fn(*[_REAL] * n)
                torch.manual_seed(1)
                second = fn(*[_REAL] * n)
        except Exception:  # noqa: BLE001  (an op of other arguments: not swept by arity)
            continue
        return n if _same(first, second) else None
    return None


def _sweep() -> list[tuple[str, str]]:
    cases = []
    for space, table in _tables().items():
        tmod = _modules(space, torch)
        for name in sorted(table):
            if name.endswith("_") or name in SKIP or (space, name) in CALLS:
                continue
            tf = getattr(tmod, name, None)
            if tf is None or isinstance(tf, type) or not callable(tf):
                continue
            n = _arity(tf)
            if n is not None:
                CALLS[(space, name)] = _by_arity(space, name, n)
                cases.append((space, name))
    return sorted(set(cases) | set(CALLS))


def _by_arity(space: str, name: str, n: int):
    def call(m, z, w):
        return getattr(_modules(space, m), name)(*(z, w)[:n])
    return call


CASES = _sweep()


def _as_torch(out):
    """shapeflow's result as torch's (tensors through NumPy; tuples and numbers kept)."""
    if isinstance(out, sf.Tensor):
        return torch.from_numpy(np.array(out.detach().numpy()))
    if isinstance(out, (tuple, list)):
        return [_as_torch(o) for o in out]
    return out


def _check(want, got, where: str) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{where}: got {type(got).__name__}"
        assert str(got.dtype) == str(want.dtype), f"{where}: {got.dtype}, torch's {want.dtype}"
        assert got.shape == want.shape, f"{where}: {tuple(got.shape)}, torch's {tuple(want.shape)}"
        want = want.resolve_conj().resolve_neg()
        if want.dtype == torch.bool or not want.dtype.is_floating_point and not want.is_complex():
            assert torch.equal(got, want), where
        else:
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-10,
                                       err_msg=where)
    elif isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), where
        for i, (a, b) in enumerate(zip(want, got)):
            _check(a, b, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r}, torch's {want!r}"


def test_the_sweep_is_broad():
    names = {n for s, n in CASES if s == "sf"}
    assert len(CASES) > 200
    for n in ("exp", "sin", "sqrt", "add", "atan2", "erf", "sort", "unique", "var", "cov"):
        assert n in names, n
    for space, names in NOT_YET.items():  # each entry is a swept op (no stale names)
        assert names <= {n for s, n in CASES if s == space}, space


@pytest.mark.parametrize("space,name", CASES, ids=[f"{s}.{n}" for s, n in CASES])
def test_complex_input_gives_torchs_answer_or_refusal(space, name):
    fn = CALLS[(space, name)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = fn(torch, torch.tensor(Z), torch.tensor(W))
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        with pytest.raises(ShapeflowError):
            fn(sf, sf.tensor(Z), sf.tensor(W))
        return
    if name in NOT_YET[space]:
        with pytest.raises(DTypeError, match="complex"):
            fn(sf, sf.tensor(Z), sf.tensor(W))
        return
    _check(want, _as_torch(fn(sf, sf.tensor(Z), sf.tensor(W))), f"{space}.{name}")


# ops made to work on complex: gradients against torch (a real loss of complex leaves, so the
# conjugate convention is checked), and against finite differences through view_as_real
GRADS = {
    "logaddexp": lambda m, z, w: m.logaddexp(z, w),
    "sinc": lambda m, z, w: m.sinc(z * 0.5) + m.special.sinc(w),
    "float_power": lambda m, z, w: m.float_power(z, w * 0.5),
    "var": lambda m, z, w: m.var(z, 1) + m.std(w, 0),
    "var_mean": lambda m, z, w: m.var_mean(z, 0)[0] + m.std_mean(w, 1, correction=0)[0],
    "norm": lambda m, z, w: m.norm(z, dim=1) + m.norm(w, 3, dim=0) + m.norm(z, 1, dim=0),
    "dist": lambda m, z, w: m.dist(z, w) + m.dist(z, w, 1.5),
    "cov": lambda m, z, w: m.cov(z) + m.corrcoef(w),
    "gradient": lambda m, z, w: m.gradient(z, dim=0)[0] * m.gradient(w, edge_order=2)[1],
    "lerp": lambda m, z, w: m.lerp(z, w, 0.3) + m.lerp(w, z, w * 0.2),
    "addcdiv": lambda m, z, w: m.addcdiv(z, w, z + 3, value=0.5),
    "vdot": lambda m, z, w: m.vdot(z[0], w[1]) * m.vdot(w[2], z[1]),
}


def _loss(m, out):
    weight = m.tensor(np.linspace(-1, 2, out.numel()).reshape(tuple(out.shape)))
    part = m.view_as_real(out) if out.is_complex() else out
    return (part.pow(2).sum(-1) if out.is_complex() else part).mul(weight).sum()


@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_are_torchs(name):
    tz, tw = (torch.tensor(v, requires_grad=True) for v in (Z, W))
    sz, sw = (sf.tensor(v, requires_grad=True) for v in (Z, W))
    _loss(torch, GRADS[name](torch, tz, tw)).backward()
    _loss(sf, GRADS[name](sf, sz, sw)).backward()
    for s, t in ((sz, tz), (sw, tw)):
        assert s.grad.dtype is sf.complex128
        np.testing.assert_allclose(s.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=1e-8,
                                   atol=1e-10)


@pytest.mark.parametrize("name", ["logaddexp", "sinc", "var", "norm", "cov", "lerp", "vdot"])
def test_gradients_match_finite_differences(name):
    z, w = Z[:3, :3], W[:3, :3]

    def fn(x, y):
        return _loss(sf, GRADS[name](sf, sf.view_as_complex(x), sf.view_as_complex(y)))
    x = sf.view_as_real(sf.tensor(z)).contiguous().requires_grad_()
    y = sf.view_as_real(sf.tensor(w)).contiguous().requires_grad_()
    assert sf.autograd.gradcheck(fn, (x, y))


@pytest.mark.parametrize("name", ["logaddexp", "sinc", "var", "norm", "float_power"])
def test_meta_shapes_and_dtypes(name):
    dt = {"torch": torch.complex64, "sf": sf.complex64}
    tz, tw = (torch.zeros(4, 4, dtype=dt["torch"]) for _ in range(2))
    sz, sw = (sf.zeros(4, 4, dtype=dt["sf"], device="meta") for _ in range(2))
    want, got = GRADS[name](torch, tz, tw), GRADS[name](sf, sz, sw)
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]


def test_refusals_name_complex_and_keep_real_input_working():
    z, x = sf.tensor(Z), sf.tensor(Z.real)
    for f in (sf.atan2, sf.hypot, sf.fmod, sf.copysign, sf.logaddexp2, sf.xlogy,
              sf.heaviside):
        with pytest.raises(DTypeError, match="complex"):
            f(z, z)
        f(x, x)
    for f in (sf.signbit, sf.erf, sf.lgamma, sf.digamma, sf.deg2rad, S.i0, S.ndtr, sf.unique,
              sf.nansum, lambda t: sf.mode(t, 0), lambda t: F.glu(t)):
        with pytest.raises(DTypeError, match="complex"):
            f(z)
        f(x)
    with pytest.raises(DTypeError, match="complex"):
        sf.fmod(z, 2.0)
    with pytest.raises(DTypeError, match="complex"):
        sf.searchsorted(z[0], z)
