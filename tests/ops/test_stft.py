"""sf.stft / sf.istft against torch's: values, shapes and dtypes over their options, input
and window gradients (PyTorch's and float64 finite differences), meta shapes and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.autograd import gradcheck
from shapeflow.errors import ShapeflowError

# both libraries warn (once) when no window is given: the rectangular one is what is tested
pytestmark = pytest.mark.filterwarnings("ignore:A window was not provided")
_RNG = np.random.default_rng(0)
SIG = _RNG.standard_normal((3, 50))
ZSIG = SIG + 1j * _RNG.standard_normal((3, 50))
WIN = _RNG.random(16) + 0.5
WIN11 = _RNG.random(11) + 0.5

# (input, window, kwargs)
STFT_CASES = [
    (SIG[0], None, {"n_fft": 10}),
    (SIG[0], None, {"n_fft": 7, "center": False}),
    (SIG, None, {"n_fft": 16, "hop_length": 4}),
    (SIG, WIN, {"n_fft": 16, "hop_length": 5, "pad_mode": "constant"}),
    (SIG, WIN, {"n_fft": 16, "hop_length": 5, "pad_mode": "replicate"}),
    (SIG, WIN, {"n_fft": 16, "hop_length": 5, "pad_mode": "circular"}),
    (SIG, WIN, {"n_fft": 16, "normalized": True, "onesided": False}),
    (SIG, WIN11, {"n_fft": 16, "win_length": 11, "hop_length": 3}),
    (SIG, None, {"n_fft": 16, "win_length": 11, "hop_length": 3}),
    (SIG, WIN11, {"n_fft": 16, "win_length": 11, "center": False, "align_to_window": True}),
    (ZSIG, WIN, {"n_fft": 16, "normalized": True}),
    (ZSIG[1], None, {"n_fft": 12, "hop_length": 7}),
]
STFT_IDS = [f"stft-{i}" for i in range(len(STFT_CASES))]


def _cast(a, single: bool):
    if a is None:
        return None
    if a.dtype.kind == "c":
        return a.astype(np.complex64 if single else np.complex128)
    return a.astype(np.float32 if single else np.float64)


def _both(a, w, single, requires_grad=False):
    a, w = _cast(a, single), _cast(w, single)
    pair = []
    for lib in (torch, sf):
        x = lib.tensor(a, requires_grad=requires_grad)
        pair.append((x, None if w is None else lib.tensor(w, requires_grad=requires_grad)))
    return pair


def _name(t) -> str:
    return str(t.dtype).split(".")[-1]


@pytest.mark.parametrize("single", [True, False], ids=["32", "64"])
@pytest.mark.parametrize("a,w,kw", STFT_CASES, ids=STFT_IDS)
def test_stft_is_torchs(a, w, kw, single):
    (tx, tw), (sx, sw) = _both(a, w, single)
    t = torch.stft(tx, window=tw, return_complex=True, **kw)
    s = sf.stft(sx, window=sw, return_complex=True, **kw)
    assert tuple(s.shape) == tuple(t.shape) and _name(s) == _name(t)
    tol = 1e-4 if single else 1e-10
    np.testing.assert_allclose(s.numpy(), t.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("a,w,kw", STFT_CASES, ids=STFT_IDS)
def test_stft_gradients_are_torchs_and_finite_differences(a, w, kw):
    (tx, tw), (sx, sw) = _both(a, w, False, requires_grad=True)
    cot = _RNG.standard_normal(tuple(torch.stft(tx, window=tw, return_complex=True,
                                                **kw).shape) + (2,))
    for lib, x, win in ((torch, tx, tw), (sf, sx, sw)):
        out = lib.view_as_real(lib.stft(x, window=win, return_complex=True, **kw))
        (out * lib.tensor(cot)).sum().backward()
    for s, t in ((sx, tx), (sw, tw)):
        if t is not None:
            np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-9)
    if kw["n_fft"] == 16 and "hop_length" in kw:  # a few, finite differences being slow
        args = (sx,) if sw is None else (sx, sw)
        assert gradcheck(lambda x, *w: sf.view_as_real(
            sf.stft(x, window=w[0] if w else None, return_complex=True, **kw)), args)


ISTFT_CASES = [  # (stft kwargs, extra istft kwargs, window length or None)
    ({"n_fft": 16, "hop_length": 4}, {}, 16),
    ({"n_fft": 16, "hop_length": 4}, {"length": 60}, 16),
    ({"n_fft": 16, "hop_length": 4}, {"length": 40}, 16),
    ({"n_fft": 16, "hop_length": 4, "center": False}, {}, None),
    ({"n_fft": 16, "hop_length": 4, "win_length": 12}, {}, 12),
    ({"n_fft": 16, "hop_length": 4, "onesided": False, "normalized": True}, {}, 16),
    ({"n_fft": 16, "hop_length": 4, "onesided": False}, {"return_complex": True}, 16),
    ({"n_fft": 15, "hop_length": 5}, {}, 15),
]
ISTFT_IDS = [f"istft-{i}" for i in range(len(ISTFT_CASES))]


def _spectrum(skw, wlen, batched=True):
    w = None if wlen is None else np.hanning(wlen + 2)[1:-1]
    tw = None if w is None else torch.tensor(w)
    x = torch.tensor(SIG if batched else SIG[0])
    return torch.stft(x, window=tw, return_complex=True, **skw).numpy(), w


@pytest.mark.parametrize("batched", [True, False], ids=["2d", "1d"])
@pytest.mark.parametrize("skw,ikw,wlen", ISTFT_CASES, ids=ISTFT_IDS)
def test_istft_is_torchs_with_gradients(skw, ikw, wlen, batched):
    spec, w = _spectrum(skw, wlen, batched)
    kw = {k: v for k, v in skw.items() if k != "onesided"} | ikw
    outs, leaves = [], []
    for lib in (torch, sf):
        z = lib.tensor(spec, requires_grad=True)
        win = None if w is None else lib.tensor(w, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # length past the signal: zeros, with a warning
            out = lib.istft(z, window=win, **kw)
        outs.append(out)
        leaves.append((z, win))
        cot = np.random.default_rng(1).standard_normal(tuple(out.shape))
        real = lib.view_as_real(out) if out.is_complex() else out
        (real * lib.tensor(cot if not out.is_complex() else np.stack([cot, cot], -1))
         ).sum().backward()
    t, s = outs
    assert tuple(s.shape) == tuple(t.shape) and _name(s) == _name(t)
    np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-10)
    for sl, tl in zip(leaves[1], leaves[0]):
        if tl is not None:
            np.testing.assert_allclose(sl.grad.numpy(), tl.grad.resolve_conj().numpy(),
                                       rtol=1e-8, atol=1e-9)


def test_istft_gradients_match_finite_differences():
    spec, w = _spectrum({"n_fft": 8, "hop_length": 2}, 8)
    z = sf.tensor(np.stack([spec[:1, :, :6].real, spec[:1, :, :6].imag], -1),
                  requires_grad=True)  # the spectrum's real view: finite differences are real
    win = sf.tensor(w, requires_grad=True)
    assert gradcheck(lambda z, w: sf.istft(sf.view_as_complex(z), 8, 2, window=w), (z, win))


def test_round_trip_and_float32():
    x = sf.tensor(SIG.astype(np.float32))
    w = sf.hann_window(16)
    y = sf.istft(x.stft(16, 4, window=w, return_complex=True), 16, 4, window=w, length=50)
    assert y.dtype is sf.float32
    np.testing.assert_allclose(y.numpy(), SIG, rtol=1e-4, atol=1e-5)


def test_return_complex_rules_are_torchs():
    x = sf.tensor(SIG[0])
    with pytest.raises(ShapeflowError, match="return_complex parameter be given"):
        sf.stft(x, 10)
    with pytest.raises(RuntimeError):
        torch.stft(torch.tensor(SIG[0]), 10)
    with pytest.warns(UserWarning, match="return_complex=False is deprecated"):
        old = sf.stft(x, 10, return_complex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.stft(torch.tensor(SIG[0]), 10, return_complex=False)
    assert tuple(old.shape) == tuple(t.shape) and old.dtype is sf.float64
    np.testing.assert_allclose(old.numpy(), t.numpy(), atol=1e-12)
    z = sf.tensor(ZSIG[0])
    assert sf.stft(z, 10).dtype is sf.complex128  # complex input: complex output by default
    assert tuple(sf.stft(z, 10, return_complex=False).shape) == (10, 26, 2)


def test_meta_shapes():
    x = sf.zeros(3, 50, device="meta")
    s = sf.stft(x, 16, 4, window=sf.ones(16, device="meta"), return_complex=True)
    assert tuple(s.shape) == (3, 9, 13) and s.dtype is sf.complex64 and s.device.type == "meta"
    y = sf.istft(s, 16, 4, length=50)
    assert tuple(y.shape) == (3, 50) and y.dtype is sf.float32


@pytest.mark.parametrize("call,match", [
    (lambda: sf.stft(sf.ones(2, 3, 40), 8, return_complex=True), "1D or 2D"),
    (lambda: sf.stft(sf.ones(40, dtype=sf.int64), 8, return_complex=True), "floating point"),
    (lambda: sf.stft(sf.ones(40), 80, center=False, return_complex=True), "n_fft"),
    (lambda: sf.stft(sf.ones(40), 8, hop_length=0, return_complex=True), "hop_length > 0"),
    (lambda: sf.stft(sf.ones(40), 8, win_length=9, return_complex=True), "win_length"),
    (lambda: sf.stft(sf.ones(40), 8, window=sf.ones(7), return_complex=True), "window"),
    (lambda: sf.stft(sf.ones(40), 8, pad_mode="foo", return_complex=True), "padding mode"),
    (lambda: sf.stft(sf.ones(40), 8, align_to_window=True, return_complex=True), "center"),
    (lambda: sf.stft(sf.ones(40, dtype=sf.complex64), 8, onesided=True), "onesided"),
    (lambda: sf.istft(sf.ones(5, 9), 8), "complex-valued"),
    (lambda: sf.istft(sf.ones(5, 9, dtype=sf.complex64), 10), "n_fft / 2 \\+ 1"),
    (lambda: sf.istft(sf.ones(5, 9, dtype=sf.complex64), 8, hop_length=9), "hop_length"),
    (lambda: sf.istft(sf.ones(5, 9, dtype=sf.complex64), 8, window=sf.zeros(8)), "overlap"),
    (lambda: sf.istft(sf.ones(5, 9, dtype=sf.complex64), 8, return_complex=True), "onesided"),
    (lambda: sf.istft(sf.ones(5, 0, dtype=sf.complex64), 8), "empty"),
])
def test_errors(call, match):
    with pytest.raises(ShapeflowError, match=match):
        call()
