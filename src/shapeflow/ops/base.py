"""The op contract: every primitive is one class with infer / saved / forward / backward.

An instance of an Op is one application of it, and, when recorded, one node of
the graph: `next` points at the nodes (or leaf tensors) its inputs came from,
`_saved` holds exactly what `saved` declared. Both are flat tuples/lists (three and two
slots per item), because recording runs once per op and each small tuple costs; read them
through `edges(node)` and `held(node)` outside the engine.
"""

from __future__ import annotations

from ..autograd import breaks
from ..autograd.grad_mode import add_observer, remove_observer  # noqa: F401  (inspect's)
from ..autograd.grad_mode import hot as _hot
from ..autograd.grad_mode import state as _modes
from ..autograd.inspect_hooks import anomaly as _anomaly
from ..device import cpu
from ..errors import DeviceError, DTypeError, GraphError, ShapeflowError
from ..tensor import Tensor, describe

INPUT, OUTPUT, NEW = 0, 1, 2

# What a saved tensor is, for memory reports (the seed's list of what training keeps).
LAYER_INPUT = "layer inputs"          # kept to compute weight gradients
ACTIVATION_INPUT = "activation inputs"  # inputs/outputs of nonlinearities
ATTENTION = "attention"               # scores / probabilities (the math kernel)
ATTENTION_OUTPUT = "attention outputs"  # flash: the output and row logsumexp, not P
DROPOUT_MASK = "dropout masks"
NORM_STATS = "normalization stats"
OTHER = "other"


class Saved:
    """One thing backward keeps alive: input i, the output, or a new intermediate."""

    __slots__ = ("source", "index", "name", "shape", "dtype", "kind")

    def __init__(self, source, index=None, name=None, shape=None, dtype=None, kind=OTHER):
        self.source, self.index, self.name = source, index, name
        self.shape, self.dtype, self.kind = shape, dtype, kind

    @classmethod
    def input(cls, index: int, kind: str = OTHER) -> Saved:
        return cls(INPUT, index=index, kind=kind)

    @classmethod
    def output(cls, kind: str = OTHER) -> Saved:
        return cls(OUTPUT, kind=kind)

    @classmethod
    def new(cls, name: str, shape, dtype, kind: str = OTHER) -> Saved:
        """An intermediate forward computes and stores as `self.<name>`."""
        return cls(NEW, name=name, shape=tuple(shape), dtype=dtype, kind=kind)

    def __repr__(self) -> str:
        what = {INPUT: f"input {self.index}", OUTPUT: "output", NEW: self.name}[self.source]
        return f"Saved({what}, {self.kind})"


# Shared declarations for the common cases (no allocation on the hot path).
X0 = Saved.input(0)
X1 = Saved.input(1)
X2 = Saved.input(2)
OUT = Saved.output()
X0_ACT = Saved.input(0, ACTIVATION_INPUT)
OUT_ACT = Saved.output(ACTIVATION_INPUT)


# How record treats an op class: what it does with saved(), or None where the op is not
# differentiable. apply reads it by type: CPython 3.11 does that faster than it reads two
# class attributes through the instance (differentiable, and whether saved() is overridden).
_SAVES_NOTHING, _SAVES_POSITIONAL, _SAVES_KEYWORD = 0, 1, 2
_recording: dict[type, int | None] = {}

# Every Op class, registered by defining it: {module.qualname: class} (ops/census.py tells
# primitives from the bases they share and lists them).
PRIMITIVES: dict[str, type] = {}


def how_to_record(cls: type) -> int | None:
    """How record treats an op class, worked out on the class's first use."""
    try:
        return _recording[cls]
    except KeyError:
        pass
    if not cls.differentiable:
        how = None
    elif cls.saved is Op.saved:
        how = _SAVES_NOTHING  # no call at all
    elif getattr(cls.saved, "__code__", None) is not None and \
            not cls.saved.__code__.co_kwonlyargcount:
        how = _SAVES_POSITIONAL  # saved(self, a, b, out): no keywords, the cheaper call
    else:
        how = _SAVES_KEYWORD  # saved(self, *inputs, out)
    _recording[cls] = how
    return how


class Op:
    """Base of every primitive. Subclasses set `name` and write the four parts."""

    name = "op"
    differentiable = True
    # True for basic-index views: backward is g written into zeros of the input's shape at
    # self.key, which the engine adds into the input's gradient in place instead
    slice_backward = False
    # how the output dtype follows from the inputs' (dtypes.Promotion: INT_TO_FLOAT...), for
    # ops whose infer computes it with dtypes.promote; None where an op declares none
    promotion = None
    # per input, flattened: where its gradient goes (its node, the leaf tensor itself, or
    # None), its shape and its dtype: (to_0, shape_0, dtype_0, to_1, ...)
    next: tuple = ()
    # per saved entry, flattened: what is kept (a Tensor, or an _OutputRef for the output)
    # and its version then (None for a new intermediate); None once released (a second
    # backward then raises)
    _saved: list | tuple | None = ()
    _entries: tuple = ()
    hooks: list | None = None
    created_at: str | None = None
    # `device`, the device forward computes on, is set by apply on each instance: forward
    # reads `self.device.xp` (its array namespace) and `self.device.kernels` (its kernel
    # table), never NumPy itself. No class default: storing an attribute that shadows a
    # class attribute costs ~230 more instructions per op in CPython 3.11 (measured).

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        PRIMITIVES[f"{cls.__module__}.{cls.__qualname__}"] = cls

    def infer(self, *inputs):
        """(shape, dtype) of the output from the inputs' shapes and dtypes; raises on misfit."""
        raise NotImplementedError

    def saved(self, *inputs, out) -> tuple:
        """What backward keeps: Saved entries (inputs, output, or new intermediates)."""
        return ()

    def forward(self, *arrays):
        """The kernel on the device's arrays, through `self.device.xp` and `.kernels`; stores
        declared intermediates on self."""
        raise NotImplementedError

    def backward(self, grad):
        """Gradients for each input (Tensor ops, so grad of grad works); None where none."""
        raise NotImplementedError(f"{self.name} has no backward")

    @property
    def saved_tensors(self) -> tuple:
        """The saved tensors, checked for in-place changes since they were saved."""
        if self._saved is None:
            raise GraphError(
                f"trying to backward through {self.name} a second time: its saved tensors "
                "were freed after the first backward",
                op=self.name,
                hint="call backward(retain_graph=True) the first time if you need to call "
                "it again, or recompute the forward",
            )
        saved = self._saved
        return tuple([_unpack(self, saved[2 * i], saved[2 * i + 1], entry)
                      for i, entry in enumerate(self._entries)])

    def needs_grad(self, i: int) -> bool:
        """Whether input i of this recorded node gets a gradient (has somewhere to send it)."""
        return self.next[3 * i] is not None

    def release(self) -> None:
        """Free what backward kept (after a backward without retain_graph)."""
        if self._saved is not None:
            self._saved = None

    def __repr__(self) -> str:
        return f"<{self.name} node>"


def _unpack(node: Op, tensor, version: int | None, entry: Saved) -> Tensor:
    if version is None:  # a new intermediate: nothing else can change it
        return tensor
    if tensor._version[0] != version:
        what = "output" if entry.source == OUTPUT else f"input {entry.index}"
        changed_by = tensor._version[1]
        by = f" by {changed_by}" if changed_by else ""
        raise GraphError(
            f"a tensor {node.name} saved for backward ({what}, {describe(tensor)}) was "
            f"modified in place{by}: saved at version {version}, now version "
            f"{tensor._version[0]}",
            op=node.name,
            hint="use the out-of-place op (x = x + y instead of x += y), or clone() the "
            "tensor before changing it",
        )
    if entry.source == OUTPUT:
        # The output is kept as its data, not the Tensor, so output -> node -> output is no
        # cycle; rebuild a Tensor that still points to this node for grad of grad.
        out = Tensor._make(tensor._data, tensor.shape, tensor.dtype, tensor.device)
        out._version = tensor._version
        out.grad_fn = node
        out.requires_grad = True
        return out
    return tensor


# Hot-path names bound once: CPython 3.11 does not specialize attribute reads on classes
_make = Tensor._make
_Tensor = Tensor  # read as a module global on the hot path
_ndarray = cpu.array_type  # what a cpu kernel returns (NumPy gives scalars for 0-d)


class _OutputRef:
    """What a node keeps of its own output: data and version counter, not the Tensor."""

    __slots__ = ("_data", "shape", "dtype", "device", "_version", "__weakref__")

    def __init__(self, out: Tensor) -> None:
        self._data, self.shape, self.dtype = out._data, out.shape, out.dtype
        self.device, self._version = out.device, out._version


def _not_a_tensor(op: Op, x) -> ShapeflowError:
    """The error for a non-tensor operand: a torch tensor's names both frameworks."""
    from ..torch_interop import is_torch_tensor, mixing_error

    if is_torch_tensor(x):
        return mixing_error(x, op.name)
    return DTypeError(f"{op.name}: expected a shapeflow Tensor, got {type(x).__name__}",
                      op=op.name, hint="wrap it with sf.tensor(...)")


def apply(op: Op, *inputs: Tensor) -> Tensor:
    """Run one op: check devices, infer the contract, run the kernel, record the node."""
    # One- and two-input ops unpacked: this runs once per op, ~0.3 us of it is this function.
    # Whether the device computes is read from the first input's data, which is None exactly
    # where `device.computes` is False (device.py): the same answer without the class
    # attribute read through the instance (+119 instructions per add, measured).
    n = len(inputs)
    if n == 2:
        a, b = inputs
        op.device = device = a.device
        if b.device is not device:
            raise device_mismatch(op.name, inputs)
        shape, dtype = op.infer(a, b)
        try:  # (free in CPython 3.11 unless it raises)
            data = op.forward(a._data, b._data) if a._data is not None else None
        except MemoryError:
            raise _no_memory(op, shape, dtype, device) from None
        grad = a.requires_grad or b.requires_grad
    elif n == 1:
        a = inputs[0]
        if type(a) is not _Tensor and not isinstance(a, _Tensor):  # e.g. a torch tensor
            raise _not_a_tensor(op, a)
        op.device = device = a.device
        shape, dtype = op.infer(a)
        try:
            data = op.forward(a._data) if a._data is not None else None
        except MemoryError:
            raise _no_memory(op, shape, dtype, device) from None
        grad = a.requires_grad
    else:
        op.device = device = inputs[0].device
        grad = False
        for t in inputs:
            if not isinstance(t, _Tensor):
                raise _not_a_tensor(op, t)
            if t.device is not device:
                raise device_mismatch(op.name, inputs)
            grad = grad or t.requires_grad
        shape, dtype = op.infer(*inputs)
        try:
            data = op.forward(*[t._data for t in inputs]) if inputs[0]._data is not None else None
        except MemoryError:
            raise _no_memory(op, shape, dtype, device) from None
    if data is not None and type(data) is not _ndarray:
        data = device.asarray(data)  # NumPy returns scalars for 0-d results
    out = _make(data, shape, dtype, device)
    if not _hot.quiet:  # some thread left the default modes: read this thread's (slower)
        return _apply_modes(op, inputs, out, grad)
    if grad:  # grad mode on, anomaly mode off, no observers: in every thread
        try:  # (free in CPython 3.11 unless it raises)
            how = _recording[type(op)]
        except KeyError:
            how = how_to_record(type(op))
        if how is None:
            out._origin = "int"
            breaks.note("no gradient", op.name)
        else:
            record(op, inputs, out, how)
    return out


def _apply_modes(op: Op, inputs, out: Tensor, grad: bool) -> Tensor:
    """The end of apply under this thread's modes: anomaly check, then no_grad or record."""
    modes = _modes.__dict__  # this thread's: one threading.local lookup, not one per name
    tracer = modes["tracer"]
    if tracer is not None:  # sf.compile is tracing this thread
        tracer.op(op, inputs, out)
    if modes["anomaly"] and out._data is not None:  # sf.detect_anomaly(): inspect.anomaly's
        _anomaly.check_forward(op, inputs, out._data)
    if grad:
        if not modes["enabled"]:
            out._origin = "no_grad"
            breaks.note("no_grad", op.name)
        else:
            how = how_to_record(type(op))
            if how is None:
                out._origin = "int"
                breaks.note("no gradient", op.name)
            else:
                record(op, inputs, out, how)
                if tracer is not None:  # a training step: what the node keeps gets slots
                    tracer.recorded(op, out)
    return out


def reads_data(what: str) -> None:
    """Called where a function skips, on a device that computes nothing, a step that reads
    the values (a check, a renormalization): under sf.compile's trace that step would be
    missing from every replay, so the trace stops there (a graph break) instead."""
    if not _hot.quiet and _modes.tracer is not None:
        _modes.tracer.reads_data(what)


def effect(fn, op, writes: tuple) -> None:
    """fn(op): a change to module state outside an op (BatchNorm's running statistics), run
    now; under sf.compile's trace also recorded, so each replay runs it with its own op."""
    if not _hot.quiet and _modes.tracer is not None:
        _modes.tracer.effect(fn, op, writes)
    fn(op)


def replayed_as_call(fn, *args, **kwargs) -> bool:
    """Under sf.compile's trace: record fn(*args, **kwargs) for each replay to make as
    written (a host-side step on live state: clip_grad_norm_) and return True, so the caller
    skips it on meta; False otherwise (the caller runs it)."""
    if not _hot.quiet and _modes.tracer is not None:
        _modes.tracer.call(fn, args, kwargs)
        return True
    return False


def _no_memory(op: Op, shape, dtype, device):
    """A MemoryError in a kernel, as shapeflow's error naming the op and its output's size."""
    from ..factories import allocation_error

    return allocation_error(op.name, shape, dtype, device, "memory for the output")


def record(op: Op, inputs, out: Tensor, how: int | None = None) -> None:
    """Make `op` the node that produced `out`: link its inputs and keep what it declared."""
    if how is None:
        how = how_to_record(type(op))
    # where each input's gradient goes: its node, itself (a leaf that requires grad) or None
    if len(inputs) == 2:  # written out: this runs once per recorded op
        a, b = inputs
        op.next = (a.grad_fn or (a if a.requires_grad else None), a.shape, a.dtype,
                   b.grad_fn or (b if b.requires_grad else None), b.shape, b.dtype)
        if how == _SAVES_POSITIONAL:  # a call without keywords is the cheaper one
            entries = op.saved(a, b, out)
        else:
            entries = op.saved(a, b, out=out) if how else ()
    else:
        edges = []
        for t in inputs:
            edges += (t.grad_fn or (t if t.requires_grad else None), t.shape, t.dtype)
        op.next = tuple(edges)
        entries = op.saved(*inputs, out=out) if how else ()
    if entries:
        op._entries = entries
        keep = []
        for e in entries:
            if e.source == INPUT:
                t = inputs[e.index]
                keep.append(t)
                keep.append(t._version[0])
            elif e.source == OUTPUT:
                keep.append(_OutputRef(out))
                keep.append(out._version[0])
            else:
                data = op.__dict__.pop(e.name) if out.device.computes else None
                keep.append(Tensor._make(data, e.shape, e.dtype, out.device))
                keep.append(None)
        op._saved = keep
    if not _hot.quiet:  # this thread's anomaly mode and observers (grad_mode.state)
        modes = _modes
        if modes.anomaly:
            op.created_at = _anomaly.user_frame()
            op.module_path = breaks.current_path()
        for observer in modes.observers:
            observer(op, inputs, out)
    out.grad_fn = op
    out.requires_grad = True


def device_mismatch(op: str, inputs) -> DeviceError:
    devices = sorted({str(t.device) for t in inputs})
    return DeviceError(
        f"{op}: operands are on different devices ({' and '.join(devices)})",
        op=op,
        operands=[(f"input {i}", describe(t)) for i, t in enumerate(inputs)],
        hint="move them to one device with .to('cpu') (a meta tensor has no data to compute "
        "with)" if "meta" in devices else "move them to one device with .to(...)",
    )


def edges(node: Op) -> list:
    """Per input of a recorded node: (its node, leaf tensor or None; shape; dtype)."""
    nxt = node.next
    return [nxt[i:i + 3] for i in range(0, len(nxt), 3)]


def held(node: Op) -> list:
    """Per saved entry of a recorded node: (the Saved entry, the Tensor or _OutputRef kept);
    empty once a backward released them."""
    return list(zip(node._entries, node._saved[0::2])) if node._saved else []


def saved_arrays(node: Op) -> list:
    """The arrays a recorded node keeps alive for backward (for memory checks)."""
    return [t._data for _, t in held(node)]


def storage_nbytes(t):
    """Bytes of the memory a (saved) tensor keeps alive: a view keeps its whole base."""
    owner = getattr(t, "_base", None)
    owner = t if owner is None else owner
    return owner.shape.numel() * owner.dtype.itemsize
