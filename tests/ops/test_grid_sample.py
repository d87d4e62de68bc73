"""grid_sample, the integer-coded grid_sampler forms and affine_grid against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn.functional as F
from shapeflow.errors import DTypeError, ShapeError
from tests.ops.harness import check_op

RNG = np.random.default_rng(3)


def _theirs(mode):
    """PyTorch's grid_sample; nearest's grid gradient is zero there and absent here."""
    if mode == "nearest":
        return lambda a, b, *r: TF.grid_sample(a, b.detach(), mode, *r)
    return lambda a, b, *r: TF.grid_sample(a, b, mode, *r)


def _grid(*shape):
    # past [-1, 1] on purpose: the padding modes decide those points
    return RNG.uniform(-1.4, 1.4, shape)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d(mode, padding_mode, align_corners):
    x, g = RNG.standard_normal((1, 2, 4, 5)), _grid(1, 3, 2, 2)
    check_op(lambda a, b: F.grid_sample(a, b, mode, padding_mode, align_corners),
             lambda a, b: _theirs(mode)(a, b, padding_mode, align_corners), x, g,
             rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d(mode, padding_mode, align_corners):
    x, g = RNG.standard_normal((1, 2, 3, 4, 3)), _grid(1, 2, 2, 2, 3)
    check_op(lambda a, b: F.grid_sample(a, b, mode, padding_mode, align_corners),
             lambda a, b: _theirs(mode)(a, b, padding_mode, align_corners), x, g,
             rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode, padding", [(0, 0), (1, 1), (2, 2)])
def test_grid_sampler_integer_forms(mode, padding):
    x, g = RNG.standard_normal((1, 2, 4, 4)), _grid(1, 3, 3, 2)
    check_op(lambda a, b: sf.grid_sampler_2d(a, b, mode, padding, False),
             lambda a, b: torch.grid_sampler_2d(a, b if mode != 1 else b.detach(), mode,
                                                padding, False), x, g,
             rtol=1e-4, atol=1e-5)
    if mode < 2:
        x, g = RNG.standard_normal((1, 2, 3, 4, 4)), _grid(1, 2, 3, 3, 3)
        check_op(lambda a, b: sf.grid_sampler_3d(a, b, mode, padding, True),
                 lambda a, b: torch.grid_sampler_3d(a, b if mode != 1 else b.detach(), mode,
                                                    padding, True), x, g,
                 rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(size, align_corners):
    k = len(size) - 2
    theta = RNG.standard_normal((size[0], k, k + 1))
    check_op(lambda t: F.affine_grid(t, size, align_corners),
             lambda t: TF.affine_grid(t, size, align_corners), theta)


def test_errors():
    with pytest.raises(ShapeError, match="grid must be"):
        F.grid_sample(sf.zeros(1, 2, 3, 3), sf.zeros(1, 3, 3, 3))
    with pytest.raises(ShapeError, match="mode"):
        F.grid_sample(sf.zeros(1, 2, 3, 3), sf.zeros(1, 3, 3, 2), mode="area")
    with pytest.raises(DTypeError):
        F.grid_sample(sf.zeros(1, 2, 3, 3), sf.zeros(1, 3, 3, 2, dtype=sf.float64))
    with pytest.raises(ShapeError, match="bicubic"):
        F.grid_sample(sf.zeros(1, 2, 3, 3, 3), sf.zeros(1, 3, 3, 3, 3), mode="bicubic")
    with pytest.raises(ShapeError, match="theta"):
        F.affine_grid(sf.zeros(2, 2, 3), (1, 1, 4, 4))
