"""sf.fft against torch.fft: values, dtypes and shapes for every transform with n / s, dim
and norm, gradients (PyTorch's and float64 finite differences), meta shapes and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.autograd import gradcheck
from shapeflow.errors import ShapeflowError

_RNG = np.random.default_rng(0)
X = _RNG.standard_normal((4, 6, 5))
Z = X + 1j * _RNG.standard_normal((4, 6, 5))

CASES = [
    ("fft", Z, {}), ("fft", X, {"n": 8, "dim": 1, "norm": "ortho"}),
    ("ifft", Z, {"n": 3, "norm": "forward"}), ("fft2", Z, {}), ("ifft2", X, {"s": (3, 7)}),
    ("fftn", Z, {"dim": (0, 2)}), ("ifftn", Z, {"s": (2, 4), "norm": "ortho"}),
    ("rfft", X, {}), ("rfft", X, {"n": 7, "dim": 0, "norm": "forward"}), ("irfft", Z, {}),
    ("irfft", Z, {"n": 9, "dim": 1, "norm": "ortho"}), ("irfft", X, {}), ("rfft2", X, {}),
    ("irfft2", Z, {"s": (5, 6)}), ("rfftn", X, {"norm": "ortho"}),
    ("irfftn", Z, {"dim": (0, 1)}), ("irfftn", Z, {"s": (3, 4, 7)}), ("hfft", Z, {}),
    ("hfft", Z, {"n": 7, "norm": "ortho"}), ("ihfft", X, {"n": 6, "norm": "forward"}),
    ("hfft2", Z, {}), ("ihfft2", X, {}), ("hfftn", Z, {"s": (3, 5)}),
    ("ihfftn", X, {"dim": (0, 2)}), ("fftshift", X, {}), ("ifftshift", X, {"dim": 1}),
    ("fftshift", Z, {"dim": (0, 2)}), ("ifftshift", X[:, :5], {}),
]
IDS = [f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)]


def _cast(a: np.ndarray, single: bool) -> np.ndarray:
    if a.dtype.kind == "c":
        return a.astype(np.complex64 if single else np.complex128)
    return a.astype(np.float32 if single else np.float64)


@pytest.mark.parametrize("single", [True, False], ids=["32", "64"])
@pytest.mark.parametrize("name,a,kw", CASES, ids=IDS)
def test_values_shapes_dtypes_are_torchs(name, a, kw, single):
    a = _cast(a, single)
    t = getattr(torch.fft, name)(torch.tensor(a), **kw).resolve_conj()
    s = getattr(sf.fft, name)(sf.tensor(a), **kw)
    assert tuple(s.shape) == tuple(t.shape) and s.dtype.name == str(t.dtype).split(".")[-1]
    tol = 1e-4 if single else 1e-10
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,a,kw", CASES, ids=IDS)
def test_gradients_are_torchs(name, a, kw):
    ta, sa = torch.tensor(a, requires_grad=True), sf.tensor(a, requires_grad=True)
    to, so = getattr(torch.fft, name)(ta, **kw).resolve_conj(), getattr(sf.fft, name)(sa, **kw)
    w = torch.tensor(np.random.default_rng(1).standard_normal(tuple(to.shape)))
    for m, out in ((torch, to), (sf, so)):
        ww = w if m is torch else sf.tensor(w.numpy())
        if out.is_complex():
            r = m.view_as_real(out)
            (r[..., 0] * ww + r[..., 1] ** 2).sum().backward()
        else:
            (out * ww).sum().backward()
    np.testing.assert_allclose(sa.grad.numpy(), ta.grad.resolve_conj().numpy(), rtol=1e-8,
                               atol=1e-9)


@pytest.mark.parametrize("name,kw", [("fft", {"norm": "ortho"}), ("rfft", {"n": 5}),
                                     ("irfft", {"n": 6}), ("hfft", {}), ("ihfft", {}),
                                     ("rfftn", {"s": (2, 4)}), ("irfft2", {"norm": "forward"})])
def test_gradients_match_finite_differences(name, kw):
    x = sf.tensor(_RNG.standard_normal((3, 4)), requires_grad=True)

    def real_out(x):
        out = getattr(sf.fft, name)(x, **kw)
        return sf.view_as_real(out) if out.dtype.is_complex else out
    assert gradcheck(real_out, (x,))


def test_int_and_bool_inputs_give_complex64():
    for a in (np.arange(6), np.arange(6) % 2 == 0):
        t, s = torch.fft.fft(torch.tensor(a)), sf.fft.fft(sf.tensor(a))
        assert s.dtype is sf.complex64
        np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,d", [(5, 1.0), (6, 0.5), (1, 2.0), (8, 0.1)])
def test_frequencies(n, d):
    for f in ("fftfreq", "rfftfreq"):
        t, s = getattr(torch.fft, f)(n, d), getattr(sf.fft, f)(n, d)
        assert s.dtype is sf.float32 and np.array_equal(s.numpy(), t.numpy())
    assert sf.fft.fftfreq(4, dtype=sf.float64).dtype is sf.float64


def test_meta_shapes():
    x = sf.zeros(4, 6, device="meta")
    assert tuple(sf.fft.rfft(x).shape) == (4, 4) and sf.fft.rfft(x).dtype is sf.complex64
    assert tuple(sf.fft.irfftn(sf.fft.rfftn(x), s=(4, 6)).shape) == (4, 6)
    assert tuple(sf.fft.fft2(x, s=(3, 8)).shape) == (3, 8)
    assert sf.fft.hfft(x.to(sf.complex128)).dtype is sf.float64


def test_errors():
    x = sf.ones(4)
    with pytest.raises(ShapeflowError, match="normalization"):
        sf.fft.fft(x, norm="bad")
    with pytest.raises(ShapeflowError, match="real input"):
        sf.fft.rfft(x.to(sf.complex64))
    with pytest.raises(ShapeflowError, match="data points"):
        sf.fft.fft(x, n=0)
    with pytest.raises(ShapeflowError, match="unique"):
        sf.fft.fftn(sf.ones(2, 2), dim=(0, 0))
    with pytest.raises(ShapeflowError):
        sf.fft.fft(x, dim=3)


def test_fft_is_a_module_as_torch_fft_is():
    import importlib

    import shapeflow.fft as by_import
    from shapeflow import fft as by_from

    assert by_import is by_from is sf.fft is importlib.import_module("shapeflow.fft")
    assert set(by_import.__all__) >= {"fft", "rfft", "ihfftn", "fftfreq", "fftshift"}
    torch_names = {n for n in dir(torch.fft) if not n.startswith("_") and callable(
        getattr(torch.fft, n)) and n != "Tensor"}
    assert torch_names <= set(by_import.__all__)
