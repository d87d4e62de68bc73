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


def test_the_census_shows_each_declared_promotion_kind(capsys):
    by_name = {}
    for r in census():
        by_name.setdefault(r.name, set()).add(r.promotion)
    assert by_name["exp"] == {"INT_TO_FLOAT"}
    assert by_name["eq"] == {"ALWAYS_BOOL"}  # the tensor and the number forms
    assert "DEFAULT" in by_name["add"]
    assert by_name["sum"] == {"INT_TO_LONG"}
    from shapeflow.cli import main

    assert main(["ops", "--family", "elementwise"]) == 0
    out = capsys.readouterr().out
    assert "promotion" in out and "INT_TO_FLOAT" in out and "ALWAYS_BOOL" in out


# functions under ops/ that apply a primitive and are no public name of their own, and why
NOT_PUBLIC = {
    "shapeflow.ops.base.apply": "the seam every op goes through",
    "shapeflow.ops.elementwise.bounds.clamp": "numbers-only; mixing.clamp is sf.clamp",
    "shapeflow.ops.elementwise.bounds.clip": "numbers-only; mixing.clip is sf.clip",
    "shapeflow.ops.elementwise.integer.invert": "Tensor.__invert__ (_methods.py)",
    "shapeflow.ops.elementwise.integer.div": "binary.div's rounding_mode path",
    "shapeflow.ops.index.gather_scatter.scatter": "scatter_reduce.scatter's fast path",
    "shapeflow.ops.index.subscript.index_parsed": "x[index] once the index is parsed",
    "shapeflow.ops.movement.dtype_view.view_dtype": "t.view(dtype)",
    "shapeflow.ops.nn.lstm_cell.lstm_cell": "nn.LSTM's fused step",
    "shapeflow.ops.nn.recurrent.recurrence": "nn.RNN / GRU / LSTM's whole sequence",
    "shapeflow.ops.norm.instance_norm.instance_norm_fused": "instance_norm's fast path",
}
# torch.special's functions: shapeflow/special.py names them (sf.special.X)
NOT_PUBLIC_MODULES = ("shapeflow.ops.elementwise.special_functions",)


def _op_functions():
    """Every module-level function under ops/ whose body applies a primitive."""
    import importlib
    import inspect
    import pkgutil
    import re

    import shapeflow.ops as ops

    for info in pkgutil.walk_packages(ops.__path__, "shapeflow.ops."):
        module = importlib.import_module(info.name)
        for name, fn in vars(module).items():
            if (not name.startswith("_") and inspect.isfunction(fn)
                    and fn.__module__ == info.name
                    and re.search(r"\bapply\(", inspect.getsource(fn))):
                yield f"{info.name}.{name}", fn


def test_every_op_function_that_applies_a_primitive_is_declared_public():
    from shapeflow.ops import registry

    declared = {id(e.fn) for e in registry.load()}
    undeclared = [q for q, fn in _op_functions() if id(fn) not in declared
                  and q not in NOT_PUBLIC and not q.startswith(NOT_PUBLIC_MODULES)]
    assert not undeclared, (f"op functions exported nowhere (declare them with "
                            f"@public(...), ops/registry.py): {undeclared}")
    stale = [q for q in NOT_PUBLIC if q not in dict(_op_functions())]
    assert not stale, f"NOT_PUBLIC names functions that are gone: {stale}"


def test_every_declared_name_resolves_where_declared():
    import shapeflow as sf
    import shapeflow.linalg
    import shapeflow.nn.functional as F
    from shapeflow.ops import registry

    spaces = {"sf": vars(sf), "method": vars(sf.Tensor), "functional": vars(F),
              "linalg": vars(shapeflow.linalg)}
    wrong = [f"{ns}.{name}" for e in registry.load() for ns in registry.NAMESPACES
             for name in e.names(ns) if spaces[ns].get(name) is not e.fn]
    assert not wrong, f"declared but not (or not that function) there: {wrong}"


def test_a_second_declaration_of_a_name_is_refused():
    from shapeflow.ops import registry

    first = registry.namespace("sf")["add"]

    def add(a, b):
        return a

    registry.public()(add)
    try:
        registry.namespace("sf")
    except RuntimeError as e:
        assert "sf.add is declared twice" in str(e)
    else:
        raise AssertionError("two functions declared sf.add")
    finally:
        registry.EXPORTS.pop()
    assert registry.namespace("sf")["add"] is first


def test_the_census_lists_each_primitives_public_names():
    rows = {r.qualname: r for r in census()}
    add = rows["shapeflow.ops.elementwise.binary.Add"]
    assert {"sf.add", "Tensor.add", "sf.multiply"} <= set(add.public)
    assert "F.gelu" in rows["shapeflow.ops.activation.gelu.Gelu"].public
