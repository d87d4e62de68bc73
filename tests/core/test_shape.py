"""Shape objects: a tuple with numel, one object per concrete shape."""

import shapeflow as sf
from shapeflow import shape as shape_mod
from shapeflow.shape import Shape, known_shape


def test_ops_share_one_shape_object_per_concrete_shape():
    a, b = sf.ones(3, 5) @ sf.ones(5, 7), sf.zeros(3, 7) * 2
    assert a.shape == (3, 7) and type(a.shape) is Shape
    assert a.shape is b.shape is known_shape([3, 7])


def test_symbolic_shapes_are_not_kept():
    n = sf.Dim("N")
    before = len(shape_mod._known)
    s = known_shape((n, 4))
    assert s == (n, 4) and type(s) is Shape
    assert len(shape_mod._known) == before


def test_the_table_of_known_shapes_is_bounded(monkeypatch):
    monkeypatch.setattr(shape_mod, "_KNOWN_MAX", 8)
    monkeypatch.setattr(shape_mod, "_known", {})
    for i in range(1, 30):
        assert known_shape((i, 2)) == (i, 2)
        assert len(shape_mod._known) <= 8
