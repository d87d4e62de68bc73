"""backend.norm_act_kernels: built, refused when stale, and declining what it cannot take."""

from importlib.util import find_spec

import numpy as np
import pytest

from shapeflow.backend.cpu import norm_act_kernels as K

pytestmark = pytest.mark.skipif(not K.available(), reason="compiled SiLU kernels not built")


def test_the_build_made_the_library():
    assert find_spec("shapeflow.backend.cpu._norm_act_kernels") is not None


def test_a_library_from_another_source_is_refused(tmp_path, monkeypatch):
    other = tmp_path / "norm_act_kernels.c"
    other.write_text("/* an edited source */\n")
    monkeypatch.setattr(K, "_FILE", str(other))
    monkeypatch.setitem(K._state, "loaded", False)
    monkeypatch.setitem(K._state, "lib", None)
    monkeypatch.setitem(K._state, "refused", None)
    assert not K.available()
    assert "rebuild" in K._state["refused"]
    assert K.silu(np.ones(4, np.float32)) is None  # the callers' NumPy path then


def test_declines_what_it_does_not_compute():
    x = np.linspace(-3, 3, 12, dtype=np.float32)
    assert K.silu(x.astype(np.float64)) is None
    assert K.silu(np.ones(0, np.float32)) is None
    assert K.silu_backward(np.ones(6, np.float32), x) is None  # shapes differ
    assert K.silu_backward(x.astype(np.float64), x) is None
    strided = K.silu(x[::2])  # a strided view is copied, not misread
    np.testing.assert_allclose(strided, K.silu(np.ascontiguousarray(x[::2])))
    old = K.set_enabled(False)
    try:
        assert K.silu(x) is None and not K.available()
    finally:
        K.set_enabled(old)
