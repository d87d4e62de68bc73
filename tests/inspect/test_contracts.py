"""Shape contracts: @sf.shapes and sf.check."""

import pytest

import shapeflow as sf
from shapeflow import nn


@sf.shapes("x: B L D, mask: B L -> B L D")
def masked(x, mask):
    return x * mask.unsqueeze(-1)


def test_contract_passes_and_binds():
    out = masked(sf.ones(2, 3, 4), sf.ones(2, 3))
    assert out.shape == (2, 3, 4)
    assert sf.check(out, "B L D") == {"B": 2, "L": 3, "D": 4}


def test_contract_names_the_disagreement():
    with pytest.raises(sf.ShapeError) as e:
        masked(sf.ones(2, 3, 4), sf.ones(2, 5))
    msg = str(e.value)
    assert "L = 3 from x but mask has 5" in msg and "[2, 5]" in msg


def test_contract_result_checked():
    @sf.shapes("x: B D -> B D")
    def bad(x):
        return x.sum(-1)

    with pytest.raises(sf.ShapeError) as e:
        bad(sf.ones(2, 3))
    assert "result" in str(e.value)


def test_ellipsis_and_named_batch():
    @sf.shapes("x: *batch D, y: *batch D -> *batch")
    def dot(x, y):
        return (x * y).sum(-1)

    assert dot(sf.ones(2, 5, 3), sf.ones(2, 5, 3)).shape == (2, 5)
    with pytest.raises(sf.ShapeError):
        dot(sf.ones(2, 5, 3), sf.ones(5, 2, 3))
    assert sf.check(sf.ones(4, 2, 7), "... 7") == {}


def test_module_attribute_binding():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.dim = 8

        @sf.shapes("x: B L D -> B L D", D="dim")
        def forward(self, x):
            return x

    Block()(sf.ones(2, 3, 8))
    with pytest.raises(sf.ShapeError) as e:
        Block()(sf.ones(2, 3, 4))
    assert "D = 8 from the module" in str(e.value)


def test_transposed_hint():
    with pytest.raises(sf.ShapeError) as e:
        sf.check(sf.ones(2, 64, 10), "B L D", L=10, D=64)
    assert "swapped" in e.value.hint and "transpose(1, 2)" in e.value.hint


def test_expressions_and_symbols():
    H, W = sf.Dim("H", multiple_of=16), sf.Dim("W", multiple_of=16)
    x = sf.empty("B", H * W // 256, 768, device="meta")
    assert sf.check(x, "B N 768")["N"] == H * W // 256
    sf.check(sf.empty(2, 12, device="meta"), "B 3*D", D=4)
    with pytest.raises(sf.ShapeError):
        sf.check(sf.empty(2, 13, device="meta"), "B 3*D", D=4)
