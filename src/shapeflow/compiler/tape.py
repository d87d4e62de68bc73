"""The tape: what one trace recorded, as a flat list over numbered slots.

A slot is one tensor value of the region: an input, a piece of module state (a parameter or
buffer, read from the module at each call), a parameter's .grad as the call finds it, or
what an op, an in-place write, a factory or a backward made. Shapes are symbolic in the
dynamic dims; `bind` makes them numbers for one shape.

A training step adds four kinds of entry: a node's backward (run on the replay's arrays),
an in-place gradient sum, a gradient handed to a parameter's .grad, and a call the region
makes as it is (optimizer.step(), zero_grad(), a scheduler's step) or a module's effect
(BatchNorm's running statistics).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..shape import Shape
from ..symbolic import Dim, evaluator

INPUT, STATE, OP, FILL = "input", "state", "op", "fill"
GRAD, AUX, DROPPED = "grad", "aux", "dropped"  # a .grad read at the call; an op's saved
# intermediate; a slot no entry makes (a discarded probe)
# entry kinds: (RUN, op, input slots, out slot), (COPY, target slot, source slot),
# (MAKE, fill, out slot), (BACKWARD, node, grad slot, saved slots, out slots),
# (IADD, target slot, source slot), (GRADSET, parameter, grad slot, sum-into slot or None),
# (CALL, function, args, kwargs), (EFFECT, function, op)
RUN, COPY, MAKE, BACKWARD, IADD, GRADSET, CALL, EFFECT = range(8)


@dataclass
class Slot:
    """One tensor value: how it is made, its (symbolic) shape and dtype, whose view it is."""

    kind: str
    shape: tuple
    dtype: object
    view_of: int | None = None  # the slot whose memory it shares (a view), else None
    made_by: str = ""  # the op, or the input/state it is
    made: int = 0  # the entry count when it was made
    died: int | None = None  # the entry count when the trace dropped it (None: kept to the end)


@dataclass
class Tape:
    """One traced region: slots, entries in order, which slots the inputs, state and outputs
    are."""

    slots: list = field(default_factory=list)
    entries: list = field(default_factory=list)
    inputs: list = field(default_factory=list)  # slot per tensor leaf of the arguments
    state: list = field(default_factory=list)  # (tensor, slot): module state read per call
    grads: list = field(default_factory=list)  # (parameter, slot): its .grad read per call
    aux: dict = field(default_factory=dict)  # RUN entry index -> ((name, slot), ...) its
    # forward leaves on the op for backward
    # BACKWARD entry index -> (the bytes live at its busiest inside, its result slots)
    scratch: dict = field(default_factory=dict)
    outputs: object = None  # the output's leaves: ("slot", i) or ("value", v)
    output_tree: object = None
    symbols: tuple = ()  # the dynamic dims' names
    ranges: dict = field(default_factory=dict)  # name -> (lo, hi) the trace assumed
    # per entry index: (attribute, binder) of its op or fill holding symbolic sizes
    binders: dict = field(default_factory=dict)
    shape_binders: dict = field(default_factory=dict)  # slot -> binder of its shape

    def shape_of(self, slot: int):
        """A function env -> the slot's shape as numbers."""
        f = self.shape_binders.get(slot)
        if f is None:
            f = self.shape_binders[slot] = binder(tuple(self.slots[slot].shape))
        return f

    @property
    def ops(self) -> int:
        return sum(1 for e in self.entries if e[0] == RUN)

    def summary(self) -> str:
        """'64 ops' (a forward), or '64 ops, 49 backward nodes, 2 calls' (a training step)."""
        nodes = sum(1 for e in self.entries if e[0] == BACKWARD)
        calls = sum(1 for e in self.entries if e[0] == CALL)
        return f"{self.ops} ops" + (f", {nodes} backward nodes, {calls} calls" if nodes or calls
                                    else "")


def has_dim(value) -> bool:
    """Whether a value holds a symbolic size somewhere (tuples, lists, slices, dicts)."""
    t = type(value)
    if t is Dim:
        return True
    if t is tuple or t is list or t is Shape:
        return any(has_dim(v) for v in value)
    if t is slice:
        return has_dim(value.start) or has_dim(value.stop) or has_dim(value.step)
    if t is dict:
        return any(has_dim(v) for v in value.values())
    if _is_spec(t):
        return any(has_dim(v) for _, v in _fields(value))
    return False


def _is_spec(t: type) -> bool:
    """An ops helper object holding sizes (a pooling window's spec), bound field by field;
    never a tensor, an op or a module (their sizes are not the op's to bind)."""
    return t.__module__.startswith("shapeflow.ops.") and not hasattr(t, "infer")


def _fields(value) -> list:
    names = getattr(type(value), "__slots__", None)
    if names is None:
        return list(getattr(value, "__dict__", {}).items())
    return [(n, getattr(value, n)) for n in names if hasattr(value, n)]


def bind_value(value, env: dict):
    """The value with each symbolic size made a number under env {name: int}."""
    t = type(value)
    if t is Dim:
        return value.evaluate(env)
    if t is tuple:
        return tuple(bind_value(v, env) for v in value)
    if t is Shape:
        return Shape(bind_value(v, env) for v in value)
    if t is list:
        return [bind_value(v, env) for v in value]
    if t is slice:
        return slice(bind_value(value.start, env), bind_value(value.stop, env),
                     bind_value(value.step, env))
    if t is dict:
        return {k: bind_value(v, env) for k, v in value.items()}
    return value


def binder(value):
    """A function env -> value with its symbolic sizes made numbers: built once per trace,
    called once per bound shape (no symbolic algebra then)."""
    t = type(value)
    if t is Dim:
        return evaluator(value)
    if not has_dim(value):
        return lambda env, v=value: v
    if t is tuple or t is list or t is Shape:
        parts = [binder(v) for v in value]
        return (lambda env: t([f(env) for f in parts])) if t is not list else \
            (lambda env: [f(env) for f in parts])
    if t is slice:
        a, b, c = binder(value.start), binder(value.stop), binder(value.step)
        return lambda env: slice(a(env), b(env), c(env))
    if t is dict:
        keys, parts = list(value), [binder(v) for v in value.values()]
        return lambda env: {k: f(env) for k, f in zip(keys, parts)}
    fields = [(n, binder(v)) for n, v in _fields(value) if has_dim(v)]

    def bound_spec(env):
        new = copy.copy(value)
        for n, f in fields:
            setattr(new, n, f(env))
        return new
    return bound_spec


def attr_binders(obj) -> tuple:
    """(name, binder) for each of obj's attributes that holds symbolic sizes."""
    d = getattr(obj, "__dict__", None)
    return tuple((k, binder(v)) for k, v in d.items() if has_dim(v)) if d else ()


def bound_copy(obj, binders: tuple, env: dict):
    """obj itself when it holds no symbolic size, else a copy with those attributes bound."""
    if not binders:
        return obj
    new = copy.copy(obj)
    for k, f in binders:
        setattr(new, k, f(env))
    return new


def slot_nbytes(slot: Slot, env: dict) -> int:
    """Bytes slot's own memory holds at env (a view holds none)."""
    if slot.view_of is not None:
        return 0
    n = 1
    for s in slot.shape:
        n *= s.evaluate(env) if type(s) is Dim else s
    return n * slot.dtype.itemsize
