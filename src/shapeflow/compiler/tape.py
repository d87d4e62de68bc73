"""The tape: what one trace recorded, as a flat list over numbered slots.

A slot is one tensor value of the region: an input, a piece of module state (a parameter or
buffer, read from the module at each call), or what an op, an in-place write or a factory
made. Shapes are symbolic in the dynamic dims; `bind` makes them numbers for one shape.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..symbolic import Dim, evaluator

INPUT, STATE, OP, FILL = "input", "state", "op", "fill"
# entry kinds: ("op", op, input slots, out slot), ("copy", target slot, source slot),
# ("fill", fill, out slot)
RUN, COPY, MAKE = 0, 1, 2


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


def has_dim(value) -> bool:
    """Whether a value holds a symbolic size somewhere (tuples, lists, slices, dicts)."""
    t = type(value)
    if t is Dim:
        return True
    if t is tuple or t is list:
        return any(has_dim(v) for v in value)
    if t is slice:
        return has_dim(value.start) or has_dim(value.stop) or has_dim(value.step)
    if t is dict:
        return any(has_dim(v) for v in value.values())
    return False


def bind_value(value, env: dict):
    """The value with each symbolic size made a number under env {name: int}."""
    t = type(value)
    if t is Dim:
        return value.evaluate(env)
    if t is tuple:
        return tuple(bind_value(v, env) for v in value)
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
    if t is tuple or t is list:
        parts = [binder(v) for v in value]
        return (lambda env: tuple([f(env) for f in parts])) if t is tuple else \
            (lambda env: [f(env) for f in parts])
    if t is slice:
        a, b, c = binder(value.start), binder(value.stop), binder(value.step)
        return lambda env: slice(a(env), b(env), c(env))
    keys, parts = list(value), [binder(v) for v in value.values()]
    return lambda env: {k: f(env) for k, f in zip(keys, parts)}


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
