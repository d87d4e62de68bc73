"""Random complex tensors as PyTorch draws them: randn's real and imaginary parts each of
variance 1/2 (so |z|^2 has mean 1), rand's each uniform in [0, 1)."""

from __future__ import annotations

import pytest

import shapeflow as sf


@pytest.mark.parametrize("dtype", [sf.complex64, sf.complex128])
def test_randn_complex_has_unit_mean_square(dtype):
    sf.manual_seed(0)
    z = sf.randn(200_000, dtype=dtype)
    assert z.dtype is dtype
    assert abs(float((z.abs() ** 2).mean()) - 1.0) < 0.01
    assert abs(float(z.real.var()) - 0.5) < 0.01 and abs(float(z.imag.var()) - 0.5) < 0.01
    assert abs(float(z.real.mean())) < 0.01


@pytest.mark.parametrize("dtype", [sf.complex64, sf.complex128])
def test_rand_complex_parts_are_uniform(dtype):
    sf.manual_seed(0)
    z = sf.rand(100_000, dtype=dtype)
    for part in (z.real, z.imag):
        assert float(part.min()) >= 0.0 and float(part.max()) < 1.0
        assert abs(float(part.mean()) - 0.5) < 0.01
