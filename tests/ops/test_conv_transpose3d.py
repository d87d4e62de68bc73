"""conv_transpose3d against PyTorch (stride, padding, output_padding, groups, dilation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import shapeflow as sf
import shapeflow.nn as nn
import shapeflow.nn.functional as F
from shapeflow.errors import ShapeError
from tests.ops.harness import check_op

RNG = np.random.default_rng(2)


@pytest.mark.parametrize("cin, cout, k, kw", [
    (2, 3, (2, 2, 2), dict()),
    (2, 2, (3, 2, 3), dict(stride=2, padding=1, output_padding=1)),
    (4, 2, (2, 3, 2), dict(stride=(3, 1, 2), padding=(2, 0, 1), groups=2, dilation=(1, 2, 1))),
    (2, 2, (2, 2, 2), dict(stride=1, dilation=3, output_padding=2)),
])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose3d(cin, cout, k, kw, bias):
    x = RNG.standard_normal((2, cin, 3, 4, 3))
    w = RNG.standard_normal((cin, cout // kw.get("groups", 1), *k))
    args = (x, w) + ((RNG.standard_normal(cout),) if bias else ())
    check_op(lambda *a: F.conv_transpose3d(*a, **kw),
             lambda *a: TF.conv_transpose3d(*a, **kw), *args, rtol=1e-4, atol=1e-5)


def test_unbatched_top_level_and_module():
    x = RNG.standard_normal((2, 3, 3, 3))
    w = RNG.standard_normal((2, 1, 2, 2, 2))
    check_op(lambda a, b: sf.conv_transpose3d(a, b, stride=2),
             lambda a, b: torch.conv_transpose3d(a, b, stride=2), x, w, rtol=1e-4, atol=1e-5)
    m = nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1)
    out = m(sf.zeros(1, 2, 3, 3, 3), output_size=(6, 6, 6))
    assert tuple(out.shape) == (1, 4, 6, 6, 6)


def test_errors():
    with pytest.raises(ShapeError, match="channels"):
        F.conv_transpose3d(sf.zeros(1, 3, 2, 2, 2), sf.zeros(2, 1, 2, 2, 2))
    with pytest.raises(ShapeError, match="output_padding"):
        F.conv_transpose3d(sf.zeros(1, 2, 2, 2, 2), sf.zeros(2, 1, 2, 2, 2), output_padding=1)
