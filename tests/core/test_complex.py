"""Complex dtypes against PyTorch: promotion, creation, the complex functions, elementwise
math and matmul, gradients (PyTorch's conjugate convention), views, errors, meta, and the
rotary embedding of Meta's Llama as written."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow import dtypes as D
from shapeflow.autograd import gradcheck
from shapeflow.errors import DTypeError, ShapeflowError

NAMES = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32",
         "float64", "complex64", "complex128"]


def _name(dt) -> str:
    return str(dt).split(".")[-1]


def _c(shape, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@pytest.mark.parametrize("a,b", list(itertools.product(NAMES, NAMES)))
def test_promote_types_is_pytorchs(a, b):
    assert D.promote_types(D.get_dtype(a), D.get_dtype(b)).name == _name(
        torch.promote_types(getattr(torch, a), getattr(torch, b)))


@pytest.mark.parametrize("a", [n for n in NAMES if n != "float16"])  # torch: complex32
@pytest.mark.parametrize("other", [1j, 2.5, 3, True, "0d-complex128", "0d-complex64"])
def test_result_type_with_scalars_and_0d_is_pytorchs(a, other):
    def conv(m):
        if isinstance(other, str):
            return m.ones((), dtype=getattr(m, other.split("-")[1]))
        return other
    want = torch.result_type(torch.ones(2, dtype=getattr(torch, a)), conv(torch))
    assert D.result_type(sf.ones(2, dtype=a), conv(sf)).name == _name(want)


def test_dtype_names_and_flags():
    assert sf.cfloat is sf.complex64 and sf.cdouble is sf.complex128
    assert D.get_dtype("cfloat") is sf.complex64 and D.get_dtype(complex) is sf.complex64
    assert sf.complex64.is_complex and not sf.complex64.is_floating_point
    assert not sf.float32.is_complex and sf.complex128.itemsize == 16


def test_creation_item_repr_numpy():
    z = sf.tensor([1 + 2j, 3])
    assert z.dtype is sf.complex64 and z.is_complex() and sf.is_complex(z)
    assert sf.tensor(np.array([1j])).dtype is sf.complex128
    t = torch.randn(3, dtype=torch.cfloat)
    s = sf.tensor(t.numpy())
    assert s.dtype is sf.complex64 and np.array_equal(s.numpy(), t.numpy())
    assert z[0].item() == 1 + 2j and z.tolist() == [1 + 2j, 3 + 0j]
    assert "complex64" in repr(z) and "2.j" in repr(z)
    assert sf.ones(2).cfloat().dtype is sf.complex64
    assert sf.ones(2).cdouble().dtype is sf.complex128
    with pytest.raises(DTypeError):
        sf.ones(2).chalf()
    assert sf.tensor([1j], requires_grad=True).requires_grad  # complex leaves take gradients


UNARY = {
    "neg": lambda m, z: -z, "exp": lambda m, z: m.exp(z), "log": lambda m, z: m.log(z),
    "sqrt": lambda m, z: m.sqrt(z), "reciprocal": lambda m, z: m.reciprocal(z),
    "sin": lambda m, z: m.sin(z), "cos": lambda m, z: m.cos(z), "tanh": lambda m, z: m.tanh(z),
    "abs": lambda m, z: m.abs(z), "angle": lambda m, z: m.angle(z), "sgn": lambda m, z: m.sgn(z),
    "conj": lambda m, z: m.conj(z).resolve_conj(), "real": lambda m, z: m.real(z),
    "imag": lambda m, z: m.imag(z), "view_as_real": lambda m, z: m.view_as_real(z),
    "isreal": lambda m, z: m.isreal(z), "square": lambda m, z: m.square(z),
    "pow3": lambda m, z: z ** 3, "rpow": lambda m, z: 2 ** z, "sum": lambda m, z: z.sum(0),
    "mean": lambda m, z: z.mean(1), "prod": lambda m, z: z.prod(1), "H": lambda m, z: z.mH,
    "conj_physical": lambda m, z: m.conj_physical(z), "log1p": lambda m, z: m.log1p(z),
    "rsqrt": lambda m, z: m.rsqrt(z), "expm1": lambda m, z: m.expm1(z),
}
BINARY = {
    "add": lambda m, a, b: a + b, "sub": lambda m, a, b: a - b, "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b, "pow": lambda m, a, b: a ** b, "matmul": lambda m, a, b: a @ b.mT,
    "scalar": lambda m, a, b: a * (1 - 2j) + (0.5 + 1j) - b / (2 + 1j),
    "polar": lambda m, a, b: m.polar(a.abs(), b.angle()),
    "complex": lambda m, a, b: m.complex(a.real, b.imag),
    "real_mix": lambda m, a, b: a.real * b + a.imag,
}


def _same(s, t, dtype_too=True):
    t = t.resolve_conj()
    assert tuple(s.shape) == tuple(t.shape)
    if dtype_too:
        assert s.dtype.name == _name(t.dtype)
    tol = 1e-5 if t.dtype in (torch.float32, torch.complex64) else 1e-10
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_values(name, dtype):
    z = _c((3, 4)).astype(dtype)
    _same(UNARY[name](sf, sf.tensor(z)), UNARY[name](torch, torch.tensor(z)))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_values(name, dtype):
    a, b = _c((3, 4), 1).astype(dtype), _c((3, 4), 2).astype(dtype)
    _same(BINARY[name](sf, sf.tensor(a), sf.tensor(b)),
          BINARY[name](torch, torch.tensor(a), torch.tensor(b)))


@pytest.mark.parametrize("real", ["float32", "float64", "int64", "bool"])
def test_mixed_real_and_complex_operands(real):
    x = (np.arange(12).reshape(3, 4) % 3).astype(real)
    z = _c((3, 4)).astype("complex64")
    for f in (lambda a, b: a * b, lambda a, b: a + b, lambda a, b: b / (a + 1),
              lambda a, b: a * 1j):
        _same(f(sf.tensor(x), sf.tensor(z)), f(torch.tensor(x), torch.tensor(z)))


# real-valued losses of complex leaves: PyTorch's gradient is dL/dx + i dL/dy
LOSSES = {
    "abs2": lambda m, a, b: (m.abs(a) ** 2).sum() + (m.abs(b) ** 3).sum(),
    "mul": lambda m, a, b: m.view_as_real(a * b).sum(),
    "div": lambda m, a, b: m.view_as_real(a / b).pow(2).sum(),
    "exp_log": lambda m, a, b: m.real(m.exp(a)).sum() + m.abs(m.log(b)).sum(),
    "sqrt_trig": lambda m, a, b: m.abs(m.sqrt(a) + m.sin(b) * m.cos(a) + m.tanh(b)).sum(),
    "pow": lambda m, a, b: m.abs(a ** b + a ** 3 + 2 / a).sum(),
    "matmul": lambda m, a, b: m.view_as_real(a @ b.mH).pow(2).sum(),
    "angle_sgn": lambda m, a, b: m.angle(a * b).sum() + m.view_as_real(m.sgn(a)).pow(2).sum(),
    "reductions": lambda m, a, b: m.abs(a.sum(0)).sum() + m.view_as_real(b.mean(1)).sum()
    + m.abs(a.prod(1)).sum(),
    "parts": lambda m, a, b: (a.real * b.imag).sum() + (m.conj(a) * b).imag.sum(),
    "polar_complex": lambda m, a, b: m.view_as_real(m.polar(a.abs(), b.angle())).sum()
    + m.abs(m.complex(a.real, b.imag) * a).sum(),
    "casts": lambda m, a, b: m.abs(a.to(m.complex64).to(m.complex128) * b).sum()
    + (a.real.to(m.complex128) * b).real.sum(),
    "view_as_complex": lambda m, a, b: m.view_as_real(
        m.view_as_complex(m.view_as_real(a) * 2) * b).sum(),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_gradients_are_pytorchs(name):
    a, b = _c((3, 4), 3), _c((3, 4), 4)
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
    sa, sb = (sf.tensor(v, requires_grad=True) for v in (a, b))
    LOSSES[name](torch, ta, tb).backward()
    loss = LOSSES[name](sf, sa, sb)
    loss.backward()
    for s, t in ((sa, ta), (sb, tb)):
        assert s.grad.dtype is sf.complex128
        np.testing.assert_allclose(s.grad.numpy(), t.grad.resolve_conj().numpy(), rtol=1e-8,
                                   atol=1e-10)


def test_real_leaf_with_complex_operands_gets_a_real_gradient():
    x, z = np.random.default_rng(5).standard_normal((3, 4)), _c((3, 4), 6)

    def f(m, x, z):
        return m.abs(x * z + x * 1j + (x + 0.5j) ** 2).sum() + m.abs(x[:1] * z).sum()
    tx, tz = torch.tensor(x, requires_grad=True), torch.tensor(z, requires_grad=True)
    sx, sz = sf.tensor(x, requires_grad=True), sf.tensor(z, requires_grad=True)
    f(torch, tx, tz).backward()
    f(sf, sx, sz).backward()
    assert sx.grad.dtype is sf.float64
    np.testing.assert_allclose(sx.grad.numpy(), tx.grad.numpy(), rtol=1e-8)
    np.testing.assert_allclose(sz.grad.numpy(), tz.grad.numpy(), rtol=1e-8)


@pytest.mark.parametrize("name", ["abs2", "div", "exp_log", "sqrt_trig", "pow", "matmul",
                                  "angle_sgn", "reductions", "polar_complex"])
def test_gradients_match_finite_differences_through_view_as_real(name):
    a, b = _c((2, 3), 7), _c((2, 3), 8)

    def fn(x, y):
        return LOSSES[name](sf, sf.view_as_complex(x), sf.view_as_complex(y))
    x = sf.view_as_real(sf.tensor(a)).contiguous().requires_grad_()
    y = sf.view_as_real(sf.tensor(b)).contiguous().requires_grad_()
    assert gradcheck(fn, (x, y))


def test_parts_are_writable_views():
    z = sf.tensor([[1 + 2j, 3 - 1j]])
    z.real[0, 0] = 7
    z.imag = sf.tensor([[5.0, 6.0]])
    assert z.tolist() == [[7 + 5j, 3 + 6j]]
    r = sf.view_as_real(z)
    r[0, 1, 1] = -4
    assert z[0, 1].item() == 3 - 4j
    f = sf.tensor([[1.0, 2.0], [3.0, 4.0]])
    sf.view_as_complex(f)[1] = 9j
    assert f.tolist() == [[1.0, 2.0], [0.0, 9.0]]


def test_errors_are_shapeflows():
    x = sf.ones(3, 2)
    with pytest.raises(ShapeflowError, match="non-complex"):
        sf.imag(x)
    with pytest.raises(ShapeflowError, match="only supported for complex"):
        sf.view_as_real(x)
    with pytest.raises(ShapeflowError, match="last dimension of size 2"):
        sf.view_as_complex(sf.ones(3, 3))
    with pytest.raises(ShapeflowError, match="stride 1"):
        sf.view_as_complex(sf.ones(2, 3).mT)
    with pytest.raises(ShapeflowError, match="same dtype"):
        sf.complex(sf.ones(2), sf.ones(2, dtype=sf.float64))
    z = sf.tensor([1j, 2])
    for f in (lambda: z < z, lambda: z > 1, lambda: sf.floor(z), lambda: sf.sign(z)):
        with pytest.raises(DTypeError, match="complex"):
            f()
    assert sf.real(x) is x and sf.conj(x) is x and bool(sf.isreal(x).all())


# ops PyTorch refuses for complex input (complex numbers have no order): `m` is torch or sf
_Z, _W = _c(4, 1), _c(4, 2)
REFUSED = {
    "relu": lambda m, z, w: m.relu(z),
    "relu6": lambda m, z, w: m.nn.functional.relu6(z),
    "hardtanh": lambda m, z, w: m.nn.functional.hardtanh(z),
    "clamp": lambda m, z, w: m.clamp(z, -1, 1),
    "clamp_min": lambda m, z, w: m.clamp_min(z, 0),
    "clamp_tensors": lambda m, z, w: m.clamp(z, w, w),
    "clip": lambda m, z, w: m.clip(z, max=1),
    "maximum": lambda m, z, w: m.maximum(z, w),
    "minimum": lambda m, z, w: m.minimum(z, w),
    "max": lambda m, z, w: m.max(z),
    "max_dim": lambda m, z, w: m.max(z, 0),
    "min": lambda m, z, w: m.min(z),
    "min_dim": lambda m, z, w: z.min(dim=0),
    "amax": lambda m, z, w: m.amax(z),
    "amin": lambda m, z, w: m.amin(z, 0),
    "aminmax": lambda m, z, w: m.aminmax(z),
    "argmax": lambda m, z, w: m.argmax(z),
    "argmin": lambda m, z, w: z.argmin(0),
    "sort": lambda m, z, w: m.sort(z),
    "argsort": lambda m, z, w: m.argsort(z),
    "msort": lambda m, z, w: m.msort(z),
    "topk": lambda m, z, w: m.topk(z, 2),
    "kthvalue": lambda m, z, w: m.kthvalue(z, 2),
    "median": lambda m, z, w: m.median(z),
    "cummax": lambda m, z, w: m.cummax(z, 0),
    "cummin": lambda m, z, w: m.cummin(z, 0),
    "floor_divide": lambda m, z, w: m.floor_divide(z, w),
    "floordiv_number": lambda m, z, w: z // 2,
    "remainder": lambda m, z, w: m.remainder(z, w),
    "remainder_number": lambda m, z, w: z % 2,
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_ops_without_an_order_refuse_complex_as_torch_does(name):
    fn = REFUSED[name]
    with pytest.raises((RuntimeError, NotImplementedError)):
        fn(torch, torch.tensor(_Z), torch.tensor(_W))
    with pytest.raises(DTypeError, match="complex"):
        fn(sf, sf.tensor(_Z), sf.tensor(_W))
    real = sf.tensor(_Z.real)  # the same call on real input still works
    fn(sf, real, sf.tensor(_W.real))


def test_meta_shapes_and_dtypes():
    z = sf.zeros(2, 3, dtype=sf.complex64, device="meta")
    for out, shape, dt in [(sf.view_as_real(z), (2, 3, 2), sf.float32),
                           (z.real, (2, 3), sf.float32), (sf.abs(z), (2, 3), sf.float32),
                           (sf.exp(z) * z, (2, 3), sf.complex64),
                           (sf.view_as_complex(sf.zeros(4, 2, device="meta")), (4,), sf.complex64),
                           (z @ z.mH, (2, 2), sf.complex64), (sf.angle(z), (2, 3), sf.float32)]:
        assert tuple(out.shape) == shape and out.dtype is dt and out.device.type == "meta"


# ---- Meta's Llama rotary embedding, as its code is written (`torch` is `m` here) --------------

def _llama_rope(torch):  # noqa: ANN001  (the module: torch or shapeflow)
    def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = torch.arange(end, device=freqs.device)
        freqs = torch.outer(t, freqs).float()
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
        return freqs_cis

    def reshape_for_broadcast(freqs_cis, x):
        ndim = x.ndim
        assert 0 <= 1 < ndim
        assert freqs_cis.shape == (x.shape[1], x.shape[-1])
        shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
        return freqs_cis.view(*shape)

    def apply_rotary_emb(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
        xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    return precompute_freqs_cis, apply_rotary_emb


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_llama_rotary_embedding_runs_as_written(dtype):
    rng = np.random.default_rng(9)
    q, k = (rng.standard_normal((2, 5, 3, 8)).astype(dtype) for _ in range(2))
    results = []
    for m in (torch, sf):
        pre, rope = _llama_rope(m)
        freqs_cis = pre(8, 5 * 2)[:5]
        xq, xk = m.tensor(q, requires_grad=True), m.tensor(k, requires_grad=True)
        oq, ok = rope(xq, xk, freqs_cis)
        ((oq * oq.sum(-1, keepdim=True)).sum() + ok.sum()).backward()
        results.append([oq.detach().numpy(), ok.detach().numpy(), xq.grad.numpy(),
                        xk.grad.numpy(), str(oq.dtype).split(".")[-1]])
    (*theirs, t_dtype), (*ours, s_dtype) = results
    assert s_dtype == t_dtype == dtype
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
