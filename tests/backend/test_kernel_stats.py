"""`sf.backends.cpu.kernel_stats()`: which path (mkl, compiled, numpy) each cpu kernel ran,
here for the optimizer updates, and `shapeflow --version --verbose`, which prints them."""

from __future__ import annotations

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import cli
from shapeflow.backend.cpu import kernels
from shapeflow.backends import cpu as backend

needs_c = pytest.mark.skipif(not kernels.available(), reason="compiled kernels not in use")


def _param(n: int, dtype=sf.float32) -> sf.nn.Parameter:
    p = sf.nn.Parameter(sf.ones(n, dtype=dtype))
    p.grad = sf.full((n,), 0.5, dtype=dtype)
    return p


@needs_c
def test_an_adam_step_counts_its_paths():
    """float32 updates run the compiled pass; float64 ones NumPy's; the count says which."""
    p32, p64 = _param(5), _param(3, sf.float64)
    opt = sf.optim.AdamW([p32, p64], lr=1e-2)
    backend.reset_kernel_stats()
    opt.step()
    opt.step()
    stats = backend.kernel_stats()
    assert stats[("adam", "compiled")] == 2 and stats[("adam", "numpy")] == 2
    backend.reset_kernel_stats()
    assert backend.kernel_stats() == {}


def test_turning_the_compiled_kernels_off_shows_as_numpy():
    p = _param(4)
    opt = sf.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.1)
    old = kernels.set_enabled(False)
    try:
        backend.reset_kernel_stats()
        opt.step()
        opt.step()  # the second step updates the momentum with dampening: two axpy calls
    finally:
        kernels.set_enabled(old)
    stats = backend.kernel_stats()
    assert stats == {("axpy", "numpy"): 3}


def test_the_paths_give_the_same_bits():
    """A large parameter (chunked NumPy) and a small one: compiled and NumPy agree exactly."""
    rng = np.random.default_rng(0)
    inits = [rng.standard_normal(s).astype(np.float32) for s in [(200, 400), (7,)]]
    grads = [rng.standard_normal(a.shape).astype(np.float32) for a in inits]

    def run(enabled: bool) -> list:
        old = kernels.set_enabled(enabled)
        try:
            ps = [sf.nn.Parameter(sf.tensor(a)) for a in inits]
            opts = [sf.optim.Adam(ps[:1], lr=1e-2, amsgrad=True),
                    sf.optim.SGD(ps[1:], lr=0.1, momentum=0.9, nesterov=True)]
            for _ in range(3):
                for p, g in zip(ps, grads):
                    p.grad = sf.tensor(g)
                for o in opts:
                    o.step()
            return [p.detach().numpy().copy() for p in ps]
        finally:
            kernels.set_enabled(old)

    for a, b in zip(run(True), run(False)):
        np.testing.assert_array_equal(a, b)


def test_libraries_say_what_loaded():
    libs = backend.libraries()
    assert set(libs) >= {"mkl", "kernels.c", "conv_kernels.c", "norm_act_kernels.c"}
    assert (libs["kernels.c"] == "loaded") == kernels.available()
    assert all(s == "loaded" or s.startswith(("off", "not found")) for s in libs.values())


def test_version_verbose_prints_the_kernel_paths(capsys):
    opt = sf.optim.Adam([_param(3)], lr=1e-2)
    backend.reset_kernel_stats()
    with pytest.raises(SystemExit) as done:
        cli.main(["--version", "--verbose"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("shapeflow 0.1.0 (gemm: ")
    assert "libraries:" in out and "kernels.c: " in out
    assert "kernel calls in this process: none yet" in out
    opt.step()
    with pytest.raises(SystemExit):
        cli.main(["--verbose", "--version"])
    out = capsys.readouterr().out
    path = "compiled" if kernels.available() else "numpy"
    assert any(line.split() == ["adam", path, "1"] for line in out.splitlines()), out
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert "libraries:" not in capsys.readouterr().out
