"""Trace a region once on the meta device, with its dynamic dims symbolic: the tape.

The region runs as written, on meta copies of its inputs and with its modules' parameters and
buffers moved to meta for the while: no element is computed. The tracer hears every op
`apply` runs, every in-place write and every factory, and numbers the tensors they make.
Whatever it cannot record (a tensor made outside an op, data read on the host, a size it
cannot decide) stops the trace: a graph break, with the line that caused it.
"""

from __future__ import annotations

import copy
import linecache
import os
import sys
import weakref
from contextlib import contextmanager, nullcontext

from ..autograd import autocast_state, grad_mode
from ..device import get_default_device, meta, set_default_device
from ..errors import ShapeflowError
from ..symbolic import Dim, assume
from ..tensor import Tensor, describe
from .errors import Untraceable
from .tape import COPY, FILL, GRAD, INPUT, MAKE, OP, RUN, STATE, Slot, Tape, attr_binders
from .training import BackwardTracing, opaque_calls, seeding_recorded

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_line(tb=None) -> str | None:
    """'file:line: code' of the innermost frame outside shapeflow (of a traceback, or now)."""
    frames = []
    if tb is not None:
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        frames.reverse()
    else:
        f = sys._getframe(1)
        while f is not None:
            frames.append((f, f.f_lineno))
            f = f.f_back
    for frame, line in frames:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PACKAGE + os.sep):
            code = linecache.getline(path, line).strip()
            return f"{os.path.relpath(path) if path.startswith(os.getcwd()) else path}:{line}" \
                   f"{': ' + code if code else ''}"
    return None


class Tracer(BackwardTracing):
    """Numbers the tensors of a region as its ops make them; appends entries to a tape."""

    def __init__(self, tape: Tape) -> None:
        self.tape = tape
        self.slot_of: dict[int, int] = {}  # id of a live tensor -> its slot
        self.refs: list = []  # weak references whose callbacks note each tensor's death
        self.storage: dict[int, int] = {}  # id of a version counter -> the slot owning it
        self.versions: list = []
        self.pending: list = []  # (tensor, slot) made since the last event
        # a training step's: id of a node's kept output -> (it, its slot); id of a parameter
        # -> it; what each parameter's .grad should be now; state written by effects
        self.kept_outputs: dict[int, tuple] = {}
        self.param_of: dict[int, Tensor] = {}
        self.expected_grads: dict[int, Tensor | None] = {}
        self.effect_writes: set[int] = set()
        self.ran: dict[int, object] = {}  # id -> op, of every op the tape runs

    def line(self) -> str | None:
        return user_line()

    @contextmanager
    def suspended(self):
        """Ops run without being recorded (a node's backward, which is recorded whole)."""
        grad_mode.state.tracer = None
        grad_mode.state.settle()
        try:
            yield
        finally:
            grad_mode.state.tracer = self
            grad_mode.state.settle()

    def add(self, t: Tensor, kind: str, made_by: str = "") -> int:
        slot = Slot(kind, tuple(t.shape), t.dtype, None, made_by)
        slot.made = len(self.tape.entries)
        self.tape.slots.append(slot)
        s = len(self.tape.slots) - 1
        self.slot_of[id(t)] = s
        self.pending.append((t, s))
        return s

    def resolve(self) -> None:
        """Storage of the tensors made since the last event, now that their version counters
        are final (a view op shares its base's after apply returns); then their deaths are
        watched. memory.report's tracker resolves at the same points."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        for t, s in batch:
            # a view shares its base's version counter: its bytes are the base's; the
            # counters stay alive so their ids stay unique
            base = self.storage.get(id(t._version))
            if base is None:
                self.storage[id(t._version)] = s
                self.versions.append(t._version)
            else:
                self.tape.slots[s].view_of = base
            key = id(t)

            def died(_ref, s=s, key=key) -> None:  # the Python liveness memory.report counts
                self.tape.slots[s].died = len(self.tape.entries)
                if self.slot_of.get(key) == s:
                    del self.slot_of[key]

            self.refs.append(weakref.ref(t, died))
        del batch  # tensors only the batch kept die here

    def slot(self, t: Tensor, reader: str) -> int:
        s = self.slot_of.get(id(t))
        if s is None:
            raise Untraceable(f"{reader} reads a tensor no traced op made ({describe(t)}): "
                              "one made outside an op (detach(), .data, Tensor._make) or kept "
                              "from before the region", user_line())
        return s

    # the three things grad_mode's tracer hook is told of
    def op(self, op, inputs, out: Tensor) -> None:
        self.resolve()
        ins = tuple(self.slot(t, op.name) for t in inputs)
        self.ran[id(op)] = op
        s = self.add(out, OP, op.name)
        self.tape.entries.append((RUN, op, ins, s))
        binders = attr_binders(op)
        if binders:
            self.tape.binders[len(self.tape.entries) - 1] = binders

    def inplace(self, target: Tensor, result: Tensor) -> None:
        self.resolve()
        self.tape.entries.append((COPY, self.slot(target, "an in-place write"),
                                  self.slot(result, "an in-place write")))

    def reads_data(self, what: str) -> None:
        raise Untraceable(f"{what} reads the values, which a replay would skip", user_line())

    def factory(self, out: Tensor, fill) -> None:
        self.resolve()
        if fill is None:
            raise Untraceable("a factory with no values to replay (torch.empty on meta?)",
                              user_line())
        s = self.add(out, FILL, getattr(fill, "__qualname__", type(fill).__name__))
        self.tape.entries.append((MAKE, fill, s))
        binders = attr_binders(fill)
        if binders:
            self.tape.binders[len(self.tape.entries) - 1] = binders


@contextmanager
def _on_meta(tensors):
    """The module state on meta while the region is traced (no copy: the same objects, so
    the tape names the parameters the replay reads); put back however the trace ends."""
    saved = [(t, t._data, t.device) for t in tensors]
    try:
        for t in tensors:
            t._data, t.device = None, meta
        yield
    finally:
        for t, data, device in saved:
            t._data, t.device = data, device


def _meta_input(x: Tensor, dims: dict, index: int) -> Tensor:
    shape = tuple(Dim(dims[(index, d)]) if (index, d) in dims else s
                  for d, s in enumerate(x.shape))
    m = Tensor._make(None, shape, x.dtype, meta)
    m.requires_grad = x.requires_grad
    return m


def _meta_twin(module, state: list):
    """A copy of `module` on meta, and the copy of each state tensor: tracing it leaves the
    module itself alone, so other threads may run it meanwhile. None where it cannot be
    copied (then its state is moved to meta for the while, as for a function's)."""
    from ..nn.parameter import Parameter  # (compiler sits above nn)

    memo = {}
    for t in state:
        m = Tensor._make(None, t.shape, t.dtype, meta)
        memo[id(t)] = Parameter(m, requires_grad=t.requires_grad) \
            if isinstance(t, Parameter) else m
    try:
        twin = copy.deepcopy(module, memo)
    except (TypeError, copy.Error, RecursionError):
        return None
    return twin, [memo[id(t)] for t in state]


def trace(fn, leaves: list, rebuild, state: list, dims: dict, ranges: dict,
          flatten, module=None, step=None) -> Tape:
    """Run fn once on meta: `leaves` the flattened arguments (tensors become meta inputs, with
    dims[(leaf, dim)] = name symbolic), `rebuild(leaves)` the (args, kwargs) again, `state` the
    module tensors; sizes assumed within `ranges`. With `module` (fn is that module), a meta
    copy of it runs instead. `step` (a training step's optimizers, schedulers and modules) when
    grad is recorded: backward and the .grad of each parameter are traced too. Raises
    Untraceable at a graph break."""
    tape = Tape(symbols=tuple(sorted(set(dims.values()))), ranges=dict(ranges))
    tracer = Tracer(tape)
    meta_leaves = []
    for i, x in enumerate(leaves):
        if isinstance(x, Tensor):
            m = _meta_input(x, dims, i)
            tape.inputs.append(tracer.add(m, INPUT, f"input {i}"))
            meta_leaves.append(m)
        else:
            meta_leaves.append(x)
    args, kwargs = rebuild(meta_leaves)
    twin = _meta_twin(module, state) if module is not None and step is None else None
    traced = state if twin is None else twin[1]  # the tensors the run reads
    if twin is not None:
        fn = twin[0]
    versions = [t._version[0] for t in traced]
    params = [t for t in state if t.requires_grad] if step is not None else []
    grads = [(p, p._grad) for p in params]  # put back after the trace, whatever it did
    moved = [g for _, g in grads if g is not None]
    old_device, old_tracer = get_default_device(), grad_mode.state.tracer
    # autocast's cast of each weight, cached for the region, is made again in the trace (and
    # so at each replay): a cached cpu copy would be a tensor no traced op made
    old_casts, autocast_state.state.cache = autocast_state.state.cache, {}
    calls = opaque_calls(tracer, *step) if step is not None else nullcontext()
    with _on_meta((*state, *moved) if twin is None else ()), calls, seeding_recorded(tracer):
        for t, m in zip(state, traced):  # the replay reads t; the trace sees m
            tape.state.append((t, tracer.add(m, STATE, "state")))
        for p, g in grads:
            tracer.param_of[id(p)] = p
            tracer.expected_grads[id(p)] = g
            if g is not None:
                tape.grads.append((p, tracer.add(g, GRAD, "a .grad")))
        grad_mode.state.tracer = tracer
        grad_mode.state.settle()
        set_default_device(meta)  # factories inside the region make meta tensors: recorded
        try:
            with assume(ranges):
                out = fn(*args, **kwargs)
                tracer.resolve()
                out_leaves, tape.output_tree = flatten(out)  # (None: out is one leaf)
                tape.outputs = [("slot", tracer.slot(o, "the output")) if isinstance(o, Tensor)
                                else ("value", o) for o in out_leaves]
                if step is not None:
                    _check_step(tracer, out_leaves, params)
        except Untraceable:
            raise
        except ShapeflowError as e:
            raise Untraceable(f"{type(e).__name__}: {e}", user_line(e.__traceback__)) from e
        except (TypeError, ValueError, AttributeError, IndexError, KeyError,
                NotImplementedError) as e:
            raise Untraceable(f"{type(e).__name__}: {e}", user_line(e.__traceback__)) from e
        finally:
            grad_mode.state.tracer = old_tracer
            grad_mode.state.settle()
            set_default_device(old_device)
            autocast_state.state.cache = old_casts
            for p, g in grads:
                p._grad = g
    written = {e[1] for e in tape.entries if e[0] == COPY}
    effects = tracer.effect_writes if twin is None else set()  # (a copy's are the copy's)
    for (t, s), m, before in zip(tape.state, traced, versions):
        if m._version[0] != before and s not in written and id(m) not in effects:
            raise Untraceable(f"module state {describe(t)} was changed outside an op (a "
                              "running statistic updated in place?): the replay would not "
                              "change it", None)
    return tape


def _check_step(tracer: Tracer, out_leaves: list, params: list) -> None:
    """What a replay of a training step could not reproduce: a graph that leaves the region
    (its backward would run outside), a .grad set by hand."""
    for o in out_leaves:
        node = getattr(o, "grad_fn", None)
        if isinstance(o, Tensor) and node is not None and node._saved is not None:
            raise Untraceable(f"the region returns {describe(o)} with a graph backward has not "
                              "run through: compile the whole step (forward, backward, "
                              "optimizer.step()), or call the region under no_grad()", None)
    for p in params:
        if p._grad is not tracer.expected_grads[id(p)]:
            raise Untraceable(f"the .grad of {describe(p)} was set outside backward and "
                              "zero_grad(): the replay would not set it", None)
