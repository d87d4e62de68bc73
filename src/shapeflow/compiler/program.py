"""A tape bound to one shape: a flat list of kernel calls over a list of arrays.

Binding makes every symbolic size a number (op attributes, factory bounds), tells each op
its device, and works out when each value is last read, so the replay frees it there as
eager Python would. Replaying runs the ops' forward kernels in order: no shape inference,
no contract checks, no graph, no Tensor and no module call in between. A training step's
backward entries run each node's own backward on the replay's arrays, under no_grad as the
engine runs them; its calls (optimizer.step()) run as written, in the caller's grad mode.
"""

from __future__ import annotations

from ..autograd import grad_mode
from ..device import cpu
from ..tensor import Tensor
from .tape import (
    BACKWARD,
    CALL,
    COPY,
    GRADSET,
    IADD,
    MAKE,
    RUN,
    Tape,
    bind_value,
    bound_copy,
)

_ndarray = cpu.array_type
_make = Tensor._make
RUN_KEEP = -1  # a RUN whose node keeps intermediates: they go to their slots too


class Program:
    """One tape at one binding of its dims: `run(input arrays)` gives the output leaves."""

    def __init__(self, tape: Tape, env: dict) -> None:
        self.env = dict(env)
        slots = tape.slots
        self.n = len(slots)
        self.inputs = list(tape.inputs)
        self.state = [(t, s) for t, s in tape.state]
        self.grads = list(tape.grads)
        outputs = [s for kind, s in tape.outputs if kind == "slot"]
        bound: dict[int, object] = {}  # id(traced op) -> the op the replay runs (forward and
        # backward of a node are one instance: forward leaves on it what backward reads)

        def op_for(i: int, op):
            new = bound.get(id(op))
            if new is None:
                new = bound[id(op)] = bound_copy(op, tape.binders.get(i, ()), env)
                new.device = cpu
            return new

        def meta_of(s: int) -> tuple:  # (shape, dtype) a tensor of slot s has at this binding
            return tape.shape_of(s)(env), slots[s].dtype

        last: dict[int, int] = {}  # slot -> index of the step that reads it last
        steps = []
        self.training = False
        for i, entry in enumerate(tape.entries):
            kind = entry[0]
            if kind == RUN:
                _, op, ins, out = entry
                op = op_for(i, op)
                aux = tape.aux.get(i)
                if aux:  # what the node keeps, taken off the op as record would
                    steps.append((RUN_KEEP, _Forward(op, aux), ins, out))
                else:
                    steps.append((RUN, op.forward, ins, out))
                reads = ins
            elif kind == COPY:
                _, target, source = entry
                steps.append((COPY, cpu.xp.copyto, (target, source), target))
                reads = (target, source)
            elif kind == MAKE:
                _, fill, out = entry
                fill = bound_copy(fill, tape.binders.get(i, ()), env)
                steps.append((MAKE, _Fill(fill, tape.shape_of(out)(env), slots[out].dtype.np),
                              (), out))
                reads = ()
            elif kind == BACKWARD:
                _, node, g, saved, outs = entry
                node = bound[id(node)]  # (the tracer records no backward of a node it did
                # not see run)
                steps.append((BACKWARD, _Backward(node, meta_of(g), [meta_of(s) for s in saved]),
                              (g, *saved), outs))
                reads = (g, *saved)
            elif kind == IADD:
                _, target, source = entry
                steps.append((IADD, cpu.kernels.iadd, (target, source), target))
                reads = (target, source)
            elif kind == GRADSET:
                _, param, g, into = entry
                steps.append((GRADSET, _GradSet(param, meta_of(g)), (g,) if into is None
                              else (g, into), g))
                reads = (g,) if into is None else (g, into)
            elif kind == CALL:
                _, fn, args, kwargs = entry
                steps.append((CALL, _Call(fn, args, kwargs), (), None))
                reads = ()
            else:  # EFFECT
                _, fn, op = entry
                steps.append((CALL, _Call(fn, (bound.get(id(op), op),), {}), (), None))
                reads = ()
            if kind not in (RUN, COPY, MAKE) or steps[-1][0] == RUN_KEEP:
                self.training = True
            for r in reads:
                last[r] = len(steps) - 1
        # a value is freed after the step that reads it last; a view keeps its base alive
        # (NumPy does that itself), and nothing the caller gets back is freed
        keep = set(outputs) | {s for _, s in self.state} | set(self.inputs) | \
            {s for _, s in self.grads}
        frees: list[list[int]] = [[] for _ in steps]
        for s, at in last.items():
            if s not in keep:
                frees[at].append(s)
        self.steps = [(k, fn, ins, out, tuple(frees[j])) for j, (k, fn, ins, out)
                      in enumerate(steps)]
        self.outputs = [(kind, v if kind == "slot" else bind_value(v, env))
                        for kind, v in tape.outputs]
        self.out_shapes = {s: tape.shape_of(s)(env) for s in outputs}
        self.out_dtypes = {s: slots[s].dtype for s in outputs}

    def run(self, arrays: list) -> list:
        """Replay on the inputs' arrays (in tape.inputs order): the output leaves, arrays for
        tensors and values for the rest."""
        v = [None] * self.n
        for s, a in zip(self.inputs, arrays):
            v[s] = a
        for t, s in self.state:
            v[s] = t._data  # read now: load_state_dict and optimizer steps are seen
        if self.training:  # (one at a time: CompiledFunction's step lock)
            return self._run_step(v)
        for kind, fn, ins, out, frees in self.steps:
            if kind == RUN:
                n = len(ins)
                r = fn(v[ins[0]]) if n == 1 else fn(v[ins[0]], v[ins[1]]) if n == 2 \
                    else fn(*[v[i] for i in ins])
                if type(r) is not _ndarray:
                    r = cpu.asarray(r)  # NumPy gives scalars for 0-d results
                v[out] = r
            elif kind == COPY:
                fn(v[ins[0]], v[ins[1]], casting="unsafe")
            else:
                v[out] = fn()
            for f in frees:
                v[f] = None
        return [(v[x] if kind == "slot" else x) for kind, x in self.outputs]

    def _run_step(self, v: list) -> list:
        """The replay of a training step: the forward kinds as in run, plus backward's."""
        for p, s in self.grads:
            v[s] = p._grad._data
        mode = grad_mode.state.enabled
        handed: set[int] = set()  # arrays given to a .grad this call (a second one copies)
        grad_mode.set_enabled(False)  # as the engine runs backward (and replays a forward)
        try:
            for kind, fn, ins, out, frees in self.steps:
                if kind == RUN:
                    r = fn(*[v[i] for i in ins])
                    if type(r) is not _ndarray:
                        r = cpu.asarray(r)
                    v[out] = r
                elif kind == RUN_KEEP:
                    r = fn(*[v[i] for i in ins])
                    if type(r) is not _ndarray:
                        r = cpu.asarray(r)
                    v[out] = r
                    for (_, s), a in zip(fn.aux, fn.take()):
                        v[s] = a
                elif kind == BACKWARD:
                    for s, r in zip(out, fn(v[ins[0]], [v[i] for i in ins[1:]])):
                        if s is not None:
                            v[s] = r
                elif kind == COPY:
                    fn(v[ins[0]], v[ins[1]], casting="unsafe")
                elif kind == IADD:
                    fn(v[ins[0]], v[ins[1]])
                elif kind == GRADSET:
                    v[out] = fn(v, ins, handed)
                elif kind == CALL:
                    grad_mode.set_enabled(mode)
                    try:
                        fn()
                    finally:
                        grad_mode.set_enabled(False)
                else:
                    v[out] = fn()
                for f in frees:
                    v[f] = None
        finally:
            grad_mode.set_enabled(mode)
        return [(v[x] if kind == "slot" else x) for kind, x in self.outputs]

    def wrap(self, leaves: list) -> list:
        """Output leaves as Tensors (shape and dtype from the trace)."""
        out = []
        for (kind, s), x in zip(self.outputs, leaves):
            if kind == "slot":
                out.append(Tensor._make(x, self.out_shapes[s], self.out_dtypes[s], cpu))
            else:
                out.append(x)
        return out


class _Fill:
    """A factory's values at one shape, made anew at each replay (random draws advance)."""

    __slots__ = ("fill", "shape", "np_dtype")

    def __init__(self, fill, shape: tuple, np_dtype) -> None:
        self.fill, self.shape, self.np_dtype = fill, shape, np_dtype

    def __call__(self):
        return cpu.from_numpy(self.fill(self.shape, self.np_dtype))


class _Forward:
    """A recorded node's forward: its output, then the intermediates it keeps for backward
    (which record would take off the op), into their own slots."""

    __slots__ = ("op", "aux")

    def __init__(self, op, aux: tuple) -> None:
        self.op, self.aux = op, aux

    def __call__(self, *arrays):
        return self.op.forward(*arrays)

    def take(self):
        d = self.op.__dict__
        return [d.pop(name, None) for name, _ in self.aux]


class _Backward:
    """A node's backward on the replay's arrays: its gradient and what it keeps as Tensors
    (kept at no version: nothing changes them within a replay), its results as arrays."""

    __slots__ = ("node", "grad", "saved")

    def __init__(self, node, grad: tuple, saved: list) -> None:
        self.node, self.grad, self.saved = node, grad, saved

    def __call__(self, g, saved: list) -> list:
        node = self.node
        keep = []
        for a, (shape, dtype) in zip(saved, self.saved):
            keep.append(_make(a, shape, dtype, cpu))
            keep.append(None)
        node._saved = keep
        try:
            grads = node.backward(_make(g, self.grad[0], self.grad[1], cpu))
        finally:
            node._saved = None  # as release(): the arrays go when the replay drops them
        return [None if x is None else x._data for x in grads]


class _GradSet:
    """A parameter's .grad after backward: g itself (copied where it views other memory or
    went to another leaf already, as the engine does), or g added into the .grad there."""

    __slots__ = ("param", "meta")

    def __init__(self, param, meta: tuple) -> None:
        self.param, self.meta = param, meta

    def __call__(self, v: list, ins: tuple, handed: set):
        g = v[ins[0]]
        p = self.param
        if len(ins) == 2:
            old = v[ins[1]]
            cpu.kernels.iadd(old, g)
            p._grad._version[0] += 1
            return g
        if g.base is not None or id(g) in handed:
            g = g.copy()
        handed.add(id(g))
        grad = _make(g, self.meta[0], self.meta[1], cpu)
        grad._origin = "leaf-grad"
        p._grad = grad
        return g


class _Call:
    """A call made as written at replay (optimizer.step(), a module's effect)."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn, args: tuple, kwargs: dict) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __call__(self):
        return self.fn(*self.args, **self.kwargs)
