"""The census of primitives: every op is registered, in a family, with a backward if it has one."""

from __future__ import annotations

import shapeflow  # noqa: F401  (defines every primitive)
import shapeflow.nn  # noqa: F401  (its ops: attention's)
import shapeflow.quant  # noqa: F401  (quantized products)
from shapeflow.ops.base import PRIMITIVES, Op
from shapeflow.ops.census import census, family_of, format_census, is_primitive, named

# where primitives may live outside ops/: custom autograd Functions, checkpointing,
# quantized products, and nn's attention wrapper
OUTSIDE_OPS = {"autograd.function", "recompute", "quant.modules", "nn.attention"}


def _all_op_classes() -> set[type]:
    found, todo = set(), [Op]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_op_class_is_registered_and_every_primitive_named():
    unnamed = []
    for cls in _all_op_classes():
        if not cls.__module__.startswith("shapeflow."):
            continue  # ops a test defines (a class made per call shares its qualname)
        assert PRIMITIVES[f"{cls.__module__}.{cls.__qualname__}"] is cls
        if is_primitive(cls) and not named(cls):
            unnamed.append(f"{cls.__module__}.{cls.__qualname__}")  # errors would say "op"
    assert not unnamed, f"primitives with no name (errors and graphs would say 'op'): {unnamed}"


def test_every_primitive_sits_in_a_family():
    families = {family_of(cls) for q, cls in PRIMITIVES.items() if q.startswith("shapeflow.")}
    outside = {f for f in families if f not in OUTSIDE_OPS and "." in f}
    assert not outside, f"primitives outside ops/ in unexpected places: {outside}"
    assert {"elementwise", "movement", "reduce", "matrix", "nn", "conv"} <= families


def test_differentiable_primitives_have_a_backward():
    missing = [q for q, cls in PRIMITIVES.items()
               if is_primitive(cls) and cls.differentiable and cls.backward is Op.backward
               and q.startswith("shapeflow.")]
    assert not missing, f"differentiable primitives without backward: {missing}"


def test_the_census_lists_saved_sets_and_kernels():
    rows = {r.qualname: r for r in census()}
    assert len(rows) >= 250
    mul = rows["shapeflow.ops.elementwise.binary.Mul"]
    assert mul.family == "elementwise" and mul.differentiable and set(mul.saved) == {"x0", "x1"}
    layer_norm = next(r for r in rows.values() if r.name == "layer_norm")
    assert layer_norm.kernels and any("layer_norm" in k for k in layer_norm.kernels)
    text = format_census(list(rows.values()))
    assert "primitives in" in text and "layer_norm" in text


def test_the_command_prints_the_census_and_names_an_unknown_family(capsys):
    from shapeflow.cli import main

    assert main(["ops", "--family", "nn"]) == 0
    out = capsys.readouterr().out
    assert "layer_norm" in out and "primitives in 1 families" in out
    assert main(["ops", "--family", "nope"]) == 2
    assert "the families are" in capsys.readouterr().err


def test_a_new_op_class_is_registered_and_a_nameless_one_is_caught():
    class Lost(Op):
        def forward(self, x):
            return x

    class Found(Op):
        name = "found"

    assert PRIMITIVES[f"{__name__}.{Lost.__qualname__}"] is Lost
    assert is_primitive(Lost) and not named(Lost)
    assert is_primitive(Found) and named(Found)
