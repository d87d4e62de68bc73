"""sf.summary: the shape chain before any data exists, and per-module bytes."""

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn


class TinyViTLike(nn.Module):
    """A ViT-shaped model without indexing: patchify, project, mix, head."""

    def __init__(self, patch=4, dim=32, classes=10):
        super().__init__()
        self.patch = patch
        self.project = nn.Linear(patch * patch * 3, dim)
        self.attention = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU())
        self.head = nn.Linear(dim, classes)

    def forward(self, image):
        B, C, H, W = image.shape
        P = self.patch
        x = image.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
        x = x.reshape(B, (H // P) * (W // P), P * P * C)
        x = self.attention(self.project(x))
        return self.head(x.mean(dim=1))


def test_chain_with_symbolic_dims():
    B = sf.Dim("B")
    H, W = sf.Dim("H", multiple_of=4), sf.Dim("W", multiple_of=4)
    s = sf.summary(TinyViTLike(), sf.empty(B, 3, H, W, device="meta"))
    lines = s.chain().splitlines()
    assert lines[0].split() == ["image:", "[B,", "3,", "H,", "W]"]
    assert lines[1].startswith("project:") and "H*W/16" in lines[1]
    assert lines[-1].split() == ["head:", "[B,", "10]"]
    assert s.total_params == sum(p.numel() for p in TinyViTLike().parameters())


@pytest.mark.parametrize("b,h,w", [(2, 8, 8), (3, 16, 8), (1, 4, 12)])
def test_symbolic_summary_equals_concrete(b, h, w):
    model = TinyViTLike()
    B, H, W = sf.Dim("B"), sf.Dim("H", multiple_of=4), sf.Dim("W", multiple_of=4)
    sym = sf.summary(model, sf.empty(B, 3, H, W, device="meta")).subs(B=b, H=h, W=w)
    conc = sf.summary(model, sf.randn(b, 3, h, w))
    assert [r.path for r in sym.rows] == [r.path for r in conc.rows]
    for rs, rc in zip(sym.rows, conc.rows):
        assert rs.output_shape == rc.output_shape
        assert rs.saved_bytes == rc.saved_bytes, rs.path
        assert rs.params == rc.params
    assert sym.total_saved_bytes == conc.total_saved_bytes > 0


def test_summary_table_prints():
    s = sf.summary(TinyViTLike(), sf.randn(2, 3, 8, 8))
    text = str(s)
    assert "project" in text and "Linear" in text and "parameters" in text


def test_summary_does_not_touch_the_model():
    model = TinyViTLike()
    before = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    sf.summary(model, sf.empty("B", 3, 8, 8, device="meta"))
    for k, v in model.state_dict().items():
        assert v.device == "cpu"
        np.testing.assert_array_equal(v.numpy(), before[k])
