"""A compiled region: guards each call, traces once per phase, plans per bucket, replays.

A call's *phase* is what the trace depends on: grad and autocast modes, train/eval flags,
each tensor argument's dtype, device and rank, its static sizes, and the values of the
other arguments. Its *bucket* is the range each dynamic dim's size falls in; its *shape*
the exact sizes. A new phase traces, a new bucket plans, a new shape binds the tape (no
trace); a seen shape goes straight to the replay.
"""

from __future__ import annotations

import math
import re
import threading
import time
import types
import weakref
from collections import OrderedDict

from ..autograd import autocast_state, grad_mode
from ..device import get_default_device
from ..symbolic import Dim
from ..tensor import Tensor, layout_epoch
from .buckets import Buckets
from .errors import ReplayError, Untraceable
from .plan import plan as make_plan
from .program import Program
from .pytree import flatten, is_tensor, unflatten
from .trace import trace, user_line

_EAGER = object()  # a phase that runs eagerly (it broke the trace)
_RETRY = object()  # dims were specialized: work the phase out again
MAX_PROGRAMS = 64  # bound shapes kept (LRU): 1,000 distinct lengths stay 64 programs
MAX_PLANS = 16  # bucket plans kept (LRU)

# mark_dynamic's marks: id(tensor) -> (weak reference, {dim: (min, max, name)}); by id, as
# Tensor's == is elementwise (a WeakKeyDictionary would compare tensors)
_marks: dict[int, tuple] = {}


def _marks_of(t: Tensor) -> dict:
    entry = _marks.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else {}
LIVE: weakref.WeakSet = weakref.WeakSet()  # every compiled region (sf.compiler.reset)


def mark_dynamic(t: Tensor, dim, min: int | None = None, max: int | None = None,
                 name: str | None = None) -> None:
    """Trace dim `dim` of t as a symbol (sizes in [min, max]) where a compiled region meets t
    first, instead of specializing to its size (torch._dynamo.mark_dynamic)."""
    if not is_tensor(t):
        raise ReplayError(f"mark_dynamic: expected a Tensor, got {type(t).__name__}")
    for d in (dim if isinstance(dim, (list, tuple)) else [dim]):
        if type(d) is not int or not -t.ndim <= d < t.ndim:
            raise ReplayError(f"mark_dynamic: dim {d!r} is out of range for a tensor of rank "
                              f"{t.ndim}")
        entry = _marks.get(id(t))
        if entry is None or entry[0]() is not t:
            key = id(t)
            entry = _marks[key] = (weakref.ref(t, lambda _, key=key: _marks.pop(key, None)), {})
        entry[1][d % t.ndim] = (min, max, name)


class Event:
    """One thing the compiler did for a call: trace, plan, bind, break, recompile."""

    __slots__ = ("kind", "detail", "line", "seconds")

    def __init__(self, kind: str, detail: str, line: str | None = None,
                 seconds: float = 0.0) -> None:
        self.kind, self.detail, self.line, self.seconds = kind, detail, line, seconds

    def __str__(self) -> str:
        took = f" ({self.seconds * 1e3:.1f} ms)" if self.seconds else ""
        at = f"\n      at {self.line}" if self.line else ""
        return f"{self.kind:>10}: {self.detail}{took}{at}"


class CompiledFunction:
    """fn compiled: call it as fn. `report()` says what was traced, planned and replayed."""

    def __init__(self, fn, dynamic=None, buckets=None, fullgraph: bool = False,
                 modules=(), state=(), optimizers=(), schedulers=()) -> None:
        self.fn = fn
        self.fullgraph = fullgraph
        self.roots, self.extra_state = list(modules), list(state)
        # a training step's objects whose calls the replay makes as written
        self.optimizers, self.schedulers = list(optimizers), list(schedulers)
        self.is_module = bool(self.roots) and fn is self.roots[0]
        self.step_lock = threading.RLock()
        self.names = _dynamic_names(dynamic)
        self.all_dynamic = dynamic is True
        self.never_dynamic = dynamic is False
        self.buckets = {n: Buckets(b) for n, b in (buckets or {}).items()}
        # filled by reset(): dynamic (leaf, dim) -> symbol name; ranges name -> (lo, hi);
        # first (leaf, dim) -> the size first seen (automatic dynamic); tapes phase -> Tape
        # or _EAGER; plans (phase, bucket) -> Plan; programs exact key -> (Program, tape)
        self.reset()
        LIVE.add(self)

    def _collect_state(self) -> None:
        """The modules (train/eval flags) and tensors (parameters, buffers) the region reads,
        as they are now; `epoch` is the layout they were read at."""
        self.epoch = layout_epoch[0]
        self.modules = [m for mod in self.roots for m in mod.modules()]
        seen, self.state = set(), []
        for t in [*(t for mod in self.roots for t in (*mod.parameters(), *mod.buffers())),
                  *self.extra_state]:
            if id(t) not in seen:
                seen.add(id(t))
                self.state.append(t)

    def reset(self) -> None:
        """Forget traces, plans, bound shapes, learned dynamic dims and the record."""
        self._collect_state()
        self.dynamic, self.ranges, self.first = {}, {}, {}
        self.auto: set = set()  # names given automatically (may be specialized)
        self.static: set = set()  # (leaf, dim) specialized after a size it could not decide
        self.tapes = {}
        self.plans = OrderedDict()
        self.programs = OrderedDict()
        self.events: list[Event] = []
        self.calls = self.replays = self.eager = 0
        self.counts = {"traces": 0, "plans": 0, "binds": 0, "breaks": 0}
        self.last_phase = None

    # ---- the call --------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        self.calls += 1
        leaves, tree = list(args), None
        for a in args:  # (a loop: cheaper than all() over a generator on this path)
            if type(a) is not Tensor:
                leaves, tree = flatten((args, kwargs))
                break
        else:
            if kwargs:
                leaves, tree = flatten((args, kwargs))
        grad = grad_mode.hot.quiet or grad_mode.state.enabled
        step = self._step_state(leaves) if grad else None
        if step is not None:
            if self.is_module:
                return self._eager("grad is recorded (a training forward): its backward runs "
                                   "outside the compiled module; compile the whole training "
                                   "step as a function to replay it", args, kwargs)
            if not grad_mode.hot.quiet and grad_mode.state.tracer is not None:
                return self.fn(*args, **kwargs)  # inside another region's trace: inline it
            # one training step at a time: a step changes the .grad state its guard reads,
            # and a trace moves the parameters to meta while it runs
            with self.step_lock:
                return self._run(args, kwargs, leaves, tree, grad,
                                 self._step_state(leaves))
        return self._run(args, kwargs, leaves, tree, grad, None)

    def _run(self, args, kwargs, leaves, tree, grad: bool, step):
        """The call, its guards checked: trace, plan or bind where needed, then replay."""
        if not grad_mode.hot.quiet and grad_mode.state.tracer is not None:
            return self.fn(*args, **kwargs)  # inside another region's trace: inline it
        if layout_epoch[0] != self.epoch:  # a parameter, buffer or module was replaced
            self._layout_changed()
        key, arrays = self._key(leaves, grad, step=step)
        entry = self.programs.get(key)
        if entry is None:
            entry = self._prepare(key, leaves, tree)
        elif len(self.programs) > 1:
            self.programs.move_to_end(key)
        if entry is _EAGER:
            self.eager += 1
            return self.fn(*args, **kwargs)
        program, tape = entry
        self.replays += 1
        out = program.wrap(program.run(arrays))
        return out[0] if tape.output_tree is None else unflatten(tape.output_tree, out)

    def _step_state(self, leaves) -> tuple | None:
        """Under grad mode, where something requires grad (a training step): each state
        tensor's requires_grad and whether it has a .grad now; else None."""
        if any(is_tensor(x) and x.requires_grad for x in leaves) or \
                any(t.requires_grad for t in self.state):
            return tuple([(t.requires_grad, t._grad is not None) for t in self.state])
        return None

    def __get__(self, obj, objtype=None):  # a compiled method binds as the function would
        return self if obj is None else types.MethodType(self, obj)

    def _layout_changed(self) -> None:
        """Module state was replaced somewhere: if this region's is, forget what was traced."""
        before = [(id(t), id(t._data), t.shape) for t in self.state]
        n_modules = [id(m) for m in self.modules]
        self._collect_state()
        if before != [(id(t), id(t._data), t.shape) for t in self.state] or \
                n_modules != [id(m) for m in self.modules]:
            self.tapes.clear()
            self.plans.clear()
            self.programs.clear()
            self.events.append(Event("layout", "the module's parameters, buffers or children "
                                     "were replaced: traced again at the next call"))

    def _eager(self, why: str, args, kwargs):
        self.eager += 1
        if not self.events or self.events[-1].detail != why:
            self.events.append(Event("eager", why))
        return self.fn(*args, **kwargs)

    def _key(self, leaves, grad: bool, device=None, step=None) -> tuple:
        """(the call's key: modes, each tensor's dtype, device and shape, the other values;
        the tensors' arrays). `device` stands in for the tensors' own (a plan's meta example
        keys as a call on the default device would); `step` a training step's grad state."""
        amp = (autocast_state.state.enabled, autocast_state.state.dtype) \
            if autocast_state.hot.on else None
        key = [(grad, amp, tuple([m.training for m in self.modules]), step)]
        arrays = []
        for x in leaves:
            if type(x) is Tensor or isinstance(x, Tensor):
                key.append((x.dtype, device or x.device, tuple(x.shape)))
                arrays.append(x._data)
            else:
                key.append(_hashable(x))
        return tuple(key), arrays

    # ---- a new shape: phase, bucket, binding ---------------------------------------
    def _prepare(self, key, leaves, tree):
        self._learn_dynamic(leaves)
        phase, env = self._phase(key, leaves)
        tape = self.tapes.get(phase)
        if tape is None:
            tape = self._trace(phase, leaves, tree, env)
            if tape is _RETRY:  # some dims are static now: another phase
                return self._prepare(key, leaves, tree)
        if tape is _EAGER:
            self._remember(key, _EAGER)
            return _EAGER
        if isinstance(tape, dict):  # traced per bucket (a size only a bucket decides)
            bucket = self._bucket_of(env)
            sub = tape.get(bucket)
            if sub is None:
                sub = tape[bucket] = self._trace(phase, leaves, tree, env, bucket)
            tape = sub
            if tape is _EAGER:
                self._remember(key, _EAGER)
                return _EAGER
        bucket = self._bucket_of(env)
        if (phase, bucket) not in self.plans:
            start = time.perf_counter()
            self.plans[(phase, bucket)] = p = make_plan(tape, dict(bucket))
            self.counts["plans"] += 1
            self.events.append(Event("plan", p.row(), None, time.perf_counter() - start))
            while len(self.plans) > MAX_PLANS:
                self.plans.popitem(last=False)
        start = time.perf_counter()
        program = Program(tape, env)
        self.counts["binds"] += 1
        if env:
            shape = ", ".join(f"{n}={v}" for n, v in sorted(env.items()))
            self.events.append(Event("bind", shape, None, time.perf_counter() - start))
        self.last_phase = phase
        entry = (program, tape)
        self._remember(key, entry)
        return entry

    def _remember(self, key, entry) -> None:
        self.programs[key] = entry
        while len(self.programs) > MAX_PROGRAMS:
            self.programs.popitem(last=False)

    def _learn_dynamic(self, leaves) -> None:
        """Which dims are symbols: named, marked, all (dynamic=True), or (dynamic=None) those
        whose size changed since the first call, as PyTorch's automatic dynamic shapes."""
        fresh: dict = {}  # size -> name given this call (duck sizing: equal sizes, one dim)
        for i, x in enumerate(leaves):
            if not is_tensor(x):
                continue
            marks = _marks_of(x)
            for d, size in enumerate(x.shape):
                if (i, d) in self.dynamic or (i, d) in self.static or self.never_dynamic:
                    continue
                name = None
                if d in marks:
                    lo, hi, name = marks[d]
                    name = name or (size.name if isinstance(size, Dim) else None) or \
                        _default_name(d, set(self.ranges))
                    self.ranges.setdefault(name, (lo or 1, hi or math.inf))
                elif isinstance(size, Dim) and size.name is not None:
                    name = size.name
                elif self.names is not None and d < len(self.names) and self.names[d]:
                    name = self.names[d]
                elif size in (0, 1):  # specialized, as PyTorch's: they broadcast, or are empty
                    pass
                elif self.all_dynamic or ((i, d) in self.first and self.first[(i, d)] != size):
                    name = fresh.get(size) or _default_name(d, set(self.ranges))
                    fresh[size] = name
                    self.auto.add(name)
                    if not self.all_dynamic:
                        self.events.append(Event(
                            "dynamic", f"argument {i} dim {d}: size {self.first[(i, d)]} -> "
                            f"{size}, traced as {name} from now on", user_line()))
                self.first.setdefault((i, d), size)
                if name is not None:
                    self.dynamic[(i, d)] = name
                    self.ranges.setdefault(name, (1, math.inf))

    def _phase(self, key, leaves) -> tuple:
        """The phase key (dynamic sizes left out) and the binding {name: size} of this call."""
        env: dict = {}
        parts = [key[0]]
        for i, x in enumerate(leaves):
            if not is_tensor(x):
                parts.append(key[i + 1])
                continue
            dims = []
            for d, size in enumerate(x.shape):
                name = self.dynamic.get((i, d))
                if name is not None and isinstance(size, Dim):  # a plan before any data
                    env[name] = size
                    dims.append(("dim", name))
                    continue
                lo, hi = self.ranges.get(name, (1, math.inf))
                if name is not None and lo <= size <= hi and env.get(name, size) == size:
                    env[name] = size
                    dims.append(("dim", name))
                else:  # static, or outside its range, or unequal to its namesake here
                    dims.append(size)
            parts.append((key[i + 1][0], key[i + 1][1], tuple(dims)))
        return tuple(parts), env

    def _bucket_of(self, env: dict) -> tuple:
        out = []
        for name, size in sorted(env.items()):
            if isinstance(size, Dim):  # a plan asked before any data: the whole range
                out.append((name, self.ranges.get(name, (1, math.inf))))
                continue
            lo, hi = self.buckets.get(name, Buckets()).of(size)
            rlo, rhi = self.ranges.get(name, (1, math.inf))
            out.append((name, (max(lo, rlo), min(hi, rhi))))
        return tuple(out)

    def _trace(self, phase, leaves, tree, env, bucket=None):
        """Trace the phase (over the dims' whole ranges, or one bucket's); _EAGER on a break."""
        ranges = {n: self.ranges[n] for n in env} if bucket is None else dict(bucket)
        dims = {k: n for k, n in self.dynamic.items() if n in env}
        start = time.perf_counter()
        try:
            tape = trace(self.fn, leaves, _rebuilder(tree, leaves), self.state, dims, ranges,
                         flatten, module=self.fn if self.is_module else None,
                         step=None if phase[0][3] is None else
                         (self.optimizers, self.schedulers, self.roots))
        except Untraceable as e:
            undecided = getattr(e.__cause__, "undecided", None)
            if bucket is None and undecided:
                self.events.append(Event(
                    "trace", f"a size the whole range of {', '.join(sorted(undecided))} does "
                    f"not decide ({e.reason}): traced per bucket", e.line))
                self.tapes[phase] = {}
                return {}
            auto = [k for k, n in dims.items() if n in self.auto]
            named = set(re.findall(r"[A-Za-z_]\w*", e.reason.splitlines()[0]))
            if any(dims[k] in named for k in auto):  # the sizes the error names, if it does
                auto = [k for k in auto if dims[k] in named]
            if bucket is None and auto and "cannot tell" in e.reason:
                for k in auto:  # as PyTorch's dynamic shapes do: specialize, trace again
                    self.static.add(k)
                    del self.dynamic[k]
                self.events.append(Event(
                    "specialize", f"{', '.join(sorted({dims[k] for k in auto}))} made static: "
                    f"{e.reason.splitlines()[0]}", e.line))
                return _RETRY
            self.counts["breaks"] += 1
            self.events.append(Event("break", e.reason, e.line))
            if self.fullgraph:
                raise ReplayError(f"sf.compile(fullgraph=True): {e.reason}",
                                  hint=f"at {e.line}" if e.line else None) from None
            if bucket is None:
                self.tapes[phase] = _EAGER
            return _EAGER
        self.counts["traces"] += 1
        what = ", ".join(f"{n} in [{lo}, {hi}]" for n, (lo, hi) in sorted(ranges.items()))
        self.events.append(Event("trace", tape.summary() + (f" ({what})" if what else
                                                               " (static shapes)"),
                                 None, time.perf_counter() - start))
        if bucket is None:
            self.tapes[phase] = tape
        return tape

    # ---- what it did -------------------------------------------------------------------
    def plan(self, *example, **sizes):
        """The memory plan of the bucket holding `sizes` (B=8, L=512): of the phase the
        example arguments (meta tensors with symbolic dims will do) trace, else the last.
        A function's example is traced as a training step where grad mode is on and its
        state requires grad; a module's, and anything else, as a no_grad() call would be."""
        if example:
            leaves, tree = flatten((example, {}))
            self._learn_dynamic(leaves)
            step = self._step_state(leaves) if grad_mode.is_grad_enabled() and \
                not self.is_module else None
            with grad_mode.set_grad_enabled(step is not None):  # the phase of calls on the
                key, _ = self._key(leaves, step is not None, get_default_device(), step)
                phase, env = self._phase(key, leaves)  # default device
                tape = self.tapes.get(phase)
                if tape is None:
                    tape = self._trace(phase, leaves, tree, env)
                self.last_phase = phase
        elif self.last_phase is not None:
            phase, tape = self.last_phase, self.tapes[self.last_phase]
        else:
            raise ReplayError("plan: nothing traced yet", hint="call the compiled region once, "
                              "or pass example inputs (meta tensors will do)")
        if tape is _EAGER or isinstance(tape, dict):
            raise ReplayError("plan: this phase runs eagerly (see report())")
        missing = set(tape.symbols) - set(sizes)
        if missing:
            raise ReplayError(f"plan: give a size for {', '.join(sorted(missing))}",
                              hint=f"e.g. plan({', '.join(f'{n}=8' for n in tape.symbols)})")
        bucket = self._bucket_of({n: sizes[n] for n in tape.symbols})
        return make_plan(tape, dict(bucket))

    def report(self) -> CompileReport:
        """Traces, plans, bindings, replays, eager calls and each reason, in order."""
        counts = {"calls": self.calls, "replays": self.replays, "eager": self.eager,
                  **self.counts}
        return CompileReport(counts, list(self.events))


class CompileReport:
    """What a compiled region did (sf.compiler.explain): counts and events in order."""

    def __init__(self, counts: dict, events: list) -> None:
        self.counts, self.events = counts, events

    def __str__(self) -> str:
        c = self.counts
        head = (f"{c['calls']} calls: {c['replays']} replayed, {c['eager']} eager; "
                f"{c['traces']} traces, {c['plans']} plans, {c['binds']} shapes bound, "
                f"{c['breaks']} graph breaks")
        return "\n".join([head, *(f"  {e}" for e in self.events)])

    __repr__ = __str__


def _rebuilder(tree, leaves):
    if tree is None:
        return lambda new: (tuple(new), {})
    return lambda new: unflatten(tree, new)


def _hashable(x):
    try:
        hash(x)
        return (type(x), x)
    except TypeError:
        if isinstance(x, (list, tuple)):
            return (type(x), tuple(_hashable(v) for v in x))
        if isinstance(x, dict):
            return (dict, tuple((k, _hashable(v)) for k, v in x.items()))
        return (type(x), id(x))


def _dynamic_names(dynamic):
    """dynamic='B,L' or ('B', 'L'): dim d of every tensor argument is names[d] (None: not)."""
    if dynamic is None or dynamic is True or dynamic is False:
        return None
    if isinstance(dynamic, str):
        dynamic = [n.strip() or None for n in dynamic.split(",")]
    names = list(dynamic)
    for n in names:
        if n is not None and (not isinstance(n, str) or not n.isidentifier()):
            raise ReplayError(f"dynamic: a dim name must be an identifier, got {n!r}",
                              hint="e.g. dynamic='B,L' (dim 0 is B, dim 1 is L)")
    return names


def _default_name(d: int, taken: set) -> str:
    base = {0: "B", 1: "L"}.get(d, f"D{d}")
    name, k = base, 2
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name

