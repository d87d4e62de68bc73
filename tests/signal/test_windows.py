"""sf.signal.windows and the *_window factories (signal/windows.py) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf

WINDOWS = {"bartlett": {}, "blackman": {}, "cosine": {}, "exponential": {"tau": 2.0},
           "gaussian": {"std": 1.5}, "general_cosine": {"a": [0.46, 0.23, 0.31]},
           "general_hamming": {"alpha": 0.6}, "hamming": {}, "hann": {}, "kaiser": {"beta": 5.0},
           "nuttall": {}}


@pytest.mark.parametrize("name", sorted(WINDOWS))
@pytest.mark.parametrize("M", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("sym", [True, False])
def test_signal_windows(name, M, sym):
    kw = WINDOWS[name]
    for dt in ("float32", "float64"):
        out = getattr(sf.signal.windows, name)(M, sym=sym, dtype=getattr(sf, dt), **kw)
        ref = getattr(torch.signal.windows, name)(M, sym=sym, dtype=getattr(torch, dt), **kw)
        assert out.dtype is getattr(sf, dt) and tuple(out.shape) == tuple(ref.shape)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6 if dt == "float32"
                                   else 1e-12, atol=1e-7 if dt == "float32" else 1e-14)


def test_exponential_center_and_errors():
    out = sf.signal.windows.exponential(6, center=1.0, sym=False)
    ref = torch.signal.windows.exponential(6, center=1.0, sym=False)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)
    with pytest.raises(sf.ShapeflowError, match="center"):
        sf.signal.windows.exponential(5, center=1.0)
    with pytest.raises(sf.ShapeflowError, match="non-negative"):
        sf.signal.windows.hann(-1)
    with pytest.raises(sf.DTypeError, match="floating"):
        sf.signal.windows.hann(4, dtype=sf.int64)
    with pytest.raises(sf.ShapeflowError, match="empty"):
        sf.signal.windows.general_cosine(4, a=[])


@pytest.mark.parametrize("name,kw", [("hann_window", {}), ("hamming_window", {}),
                                     ("hamming_window", {"alpha": 0.5, "beta": 0.4}),
                                     ("blackman_window", {}), ("bartlett_window", {}),
                                     ("kaiser_window", {}), ("kaiser_window", {"beta": 3.0})])
@pytest.mark.parametrize("L", [0, 1, 2, 5, 8])
@pytest.mark.parametrize("periodic", [True, False])
def test_window_factories(name, kw, L, periodic):
    out = getattr(sf, name)(L, periodic, dtype=sf.float64, **kw)
    ref = getattr(torch, name)(L, periodic, dtype=torch.float64, **kw)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12, atol=1e-14)
    assert getattr(sf, name)(L).dtype is sf.float32


def test_windows_on_meta_and_requires_grad():
    w = sf.hann_window(16, device="meta")
    assert tuple(w.shape) == (16,) and w.device == "meta"
    g = sf.signal.windows.gaussian(5, requires_grad=True)
    assert g.requires_grad and g.grad_fn is None
