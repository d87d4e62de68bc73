"""Tracing a training step: backward through the engine, .grad, and the calls made as they are.

The engine tells the tracer of each node's backward, each in-place gradient sum and each
gradient handed to a leaf's .grad. A node's backward is recorded whole (the replay runs it
on the replay's arrays, so its kernels and their order are eager's, bit for bit); the sums
and shape fix-ups between nodes are ops like any other. `optimizer.step()`, `zero_grad()`
and a scheduler's `step()` are recorded as calls the replay makes as written: they read the
live optimizer state, its step count and learning rate at each call, so none of it is baked
into the tape.
"""

from __future__ import annotations

from contextlib import contextmanager

from ..inspect.memory.tracker import LiveTracker
from ..ops.base import NEW, OUTPUT, _OutputRef
from ..tensor import Tensor, describe
from .errors import Untraceable
from .tape import AUX, BACKWARD, CALL, EFFECT, GRADSET, IADD, OP, attr_binders


class BackwardTracing:
    """The tracer's side of backward: what the engine and modules tell it (Tracer's base)."""

    def recorded(self, op, out: Tensor) -> None:
        """op was just recorded as a node: its kept output and intermediates get slots (the
        op's RUN entry is the last one; its forward leaves the intermediates on the op)."""
        run = len(self.tape.entries) - 1
        binders = attr_binders(op)  # record may have set more sizes on it (saved())
        if binders:
            self.tape.binders[run] = binders
        keep = op._saved
        if not keep:
            return
        aux = []
        for entry, obj in zip(op._entries, keep[0::2]):
            if entry.source == OUTPUT:
                self.kept_outputs[id(obj)] = (obj, self.slot_of[id(out)])
            elif entry.source == NEW:
                s = self.add(obj, AUX, f"{op.name}.{entry.name}")
                self.tape.slots[s].made = run
                aux.append((entry.name, s))
        if aux:
            self.tape.aux[run] = tuple(aux)

    def backward(self, node, g: Tensor):
        """Run node's backward (on meta) and record it whole: the replay runs it again."""
        if node.hooks:
            raise Untraceable(f"a hook on the gradient of {node.name}'s output "
                              "(register_hook) in the region", self.line())
        if self.ran.get(id(node)) is not node:
            raise Untraceable(f"backward reaches {node.name}, recorded before the region: its "
                              "forward is not in the trace", self.line())
        self.resolve()
        saved = []
        for obj in (node._saved or ())[0::2]:
            if type(obj) is _OutputRef:
                s = self.kept_outputs.get(id(obj), (None, None))[1]
            else:
                s = self.slot_of.get(id(obj))
            if s is None:
                raise Untraceable(f"{node.name}'s backward reads a tensor the trace did not "
                                  "make (a node recorded before the region?)", self.line())
            saved.append(s)
        gs = self.slot(g, f"{node.name}'s backward")
        held = [g, *(obj for obj in (node._saved or ())[0::2] if type(obj) is not _OutputRef)]
        with self.suspended(), LiveTracker(external=held) as inside:
            in_grads = node.backward(g)
            peak = inside.peak.value  # what it made at its busiest, its results included
        outs = tuple(None if x is None else self.add(x, OP, f"{node.name} backward")
                     for x in in_grads)
        self.tape.entries.append((BACKWARD, node, gs, tuple(saved), outs))
        # the scratch beyond its results, alive only while it runs (memory.report counts it)
        self.tape.scratch[len(self.tape.entries) - 1] = (peak, outs)
        return in_grads

    def unsupported(self, what: str) -> None:
        """Something in the step the replay cannot repeat: a graph break, saying what."""
        raise Untraceable(what, self.line())

    def add_grads(self, old: Tensor, g: Tensor, in_place: bool) -> Tensor:
        """The engine's gradient sum: in place into old (an IADD entry), or a new sum (an op)."""
        if not in_place:
            return old + g
        self.resolve()
        self.tape.entries.append((IADD, self.slot(old, "a gradient sum"),
                                  self.slot(g, "a gradient sum")))
        return old

    def accumulate(self, leaf: Tensor, g: Tensor) -> None:
        """leaf.grad gets g (or g is summed into it): recorded, and done to the meta leaf."""
        if leaf._hooks:
            raise Untraceable(f"a hook on the gradient of {describe(leaf)} in the region",
                              self.line())
        param = self.param_of.get(id(leaf))
        if param is None:
            raise Untraceable(f"backward reaches {describe(leaf)}, a leaf that is neither an "
                              "argument's nor the module state's", self.line())
        self.resolve()
        gs = self.slot(g, "a parameter's gradient")
        old = leaf._grad
        if old is None:
            leaf._grad = g
            self.tape.entries.append((GRADSET, param, gs, None))
        else:
            self.tape.entries.append((GRADSET, param, gs, self.slot(old, "a .grad")))
        self.expected_grads[id(leaf)] = leaf._grad

    def effect(self, fn, op, writes) -> None:
        """fn(op) changes module state outside an op (BatchNorm's running statistics): the
        replay calls it at this point, with the replay's op."""
        self.tape.entries.append((EFFECT, fn, op))
        self.effect_writes.update(id(t) for t in writes)

    def call(self, fn, args, kwargs) -> None:
        """A call the replay makes as written (optimizer.step(), zero_grad())."""
        self.resolve()
        self.tape.entries.append((CALL, fn, args, kwargs))


@contextmanager
def opaque_calls(tracer, optimizers, schedulers, modules):
    """While tracing: optimizer.step(), optimizer/module.zero_grad() and scheduler.step()
    record a CALL entry instead of running on meta (zero_grad also clears the meta grads,
    which later entries depend on)."""
    patched = []

    def patch(obj, name, make):
        original = getattr(obj, name)
        had = name in obj.__dict__
        patched.append((obj, name, had, obj.__dict__.get(name)))
        object.__setattr__(obj, name, make(original))

    def recorded_step(original):
        def step(closure=None):
            if closure is not None:
                raise Untraceable("optimizer.step(closure) in the region: the closure runs "
                                  "the model again, eagerly", tracer.line())
            tracer.call(original, (), {})
        return step

    def recorded_zero_grad(original, owner_params):
        def zero_grad(set_to_none: bool = True):
            tracer.call(original, (), {"set_to_none": set_to_none})
            if set_to_none:  # (zeroing in place changes no slot: the replay's call does it)
                for p in owner_params:
                    p._grad = None
                    if id(p) in tracer.expected_grads:
                        tracer.expected_grads[id(p)] = None
        return zero_grad

    def recorded_schedule(original):
        def step(*args, **kwargs):
            tracer.call(original, args, kwargs)
        return step

    try:
        for opt in optimizers:
            owned = [p for g in opt.param_groups for p in g["params"]]
            patch(opt, "step", recorded_step)
            patch(opt, "zero_grad", lambda f, owned=owned: recorded_zero_grad(f, owned))
        for m in modules:
            patch(m, "zero_grad", lambda f, m=m: recorded_zero_grad(f, list(m.parameters())))
        for s in schedulers:
            patch(s, "step", recorded_schedule)
        yield
    finally:
        for obj, name, had, value in reversed(patched):
            if had:
                object.__setattr__(obj, name, value)
            else:
                obj.__dict__.pop(name, None)


@contextmanager
def seeding_recorded(tracer):
    """While tracing: sf.manual_seed(s) records a CALL that reseeds at each replay (draws
    after it then repeat as eager's do); any other replacement of the default generator's
    state in the region (set_rng_state, seed()) stops the trace."""
    from .. import random as sf_random

    gen = sf_random.default_generator
    original = gen.manual_seed
    had = "manual_seed" in gen.__dict__

    def manual_seed(seed: int):
        tracer.call(original, (seed,), {})
        return gen

    gen.manual_seed = manual_seed
    rng = gen.rng
    try:
        yield
    finally:
        if had:
            gen.manual_seed = original
        else:
            del gen.manual_seed
    if gen.rng is not rng:
        raise Untraceable("the region replaces the random generator's state (set_rng_state or "
                          "seed()): the replay would not", None)
