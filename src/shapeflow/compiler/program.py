"""A tape bound to one shape: a flat list of kernel calls over a list of arrays.

Binding makes every symbolic size a number (op attributes, factory bounds), tells each op
its device, and works out when each value is last read, so the replay frees it there as
eager Python would. Replaying runs the ops' forward kernels in order: no shape inference,
no contract checks, no graph, no Tensor and no module call in between.
"""

from __future__ import annotations

from ..device import cpu
from ..tensor import Tensor
from .tape import COPY, MAKE, RUN, Tape, bind_value, bound_copy

_ndarray = cpu.array_type


class Program:
    """One tape at one binding of its dims: `run(input arrays)` gives the output leaves."""

    def __init__(self, tape: Tape, env: dict) -> None:
        self.env = dict(env)
        slots = tape.slots
        self.n = len(slots)
        self.inputs = list(tape.inputs)
        self.state = [(t, s) for t, s in tape.state]
        outputs = [s for kind, s in tape.outputs if kind == "slot"]
        last: dict[int, int] = {}  # slot -> index of the step that reads it last
        steps = []
        for i, entry in enumerate(tape.entries):
            kind = entry[0]
            if kind == RUN:
                _, op, ins, out = entry
                op = bound_copy(op, tape.binders.get(i, ()), env)
                op.device = cpu
                steps.append((RUN, op.forward, ins, out))
                reads = ins
            elif kind == COPY:
                _, target, source = entry
                steps.append((COPY, cpu.xp.copyto, (target, source), target))
                reads = (target, source)
            else:
                _, fill, out = entry
                fill = bound_copy(fill, tape.binders.get(i, ()), env)
                steps.append((MAKE, _Fill(fill, tape.shape_of(out)(env), slots[out].dtype.np),
                              (), out))
                reads = ()
            for r in reads:
                last[r] = len(steps) - 1
        # a value is freed after the step that reads it last; a view keeps its base alive
        # (NumPy does that itself), and nothing the caller gets back is freed
        keep = set(outputs) | {s for _, s in self.state} | set(self.inputs)
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
