"""`sf.memory.report(model, *inputs, ...)`: what a training step keeps, counted from the graph.

The model runs once on the meta device (a copy: nothing is allocated or computed). Every op
recorded declares what backward keeps (`Op.saved`); the report adds up those storages once
each (a view, a parameter, or a tensor two ops keep costs nothing more), groups them by
module and by kind, and a `LiveTracker` follows every tensor's lifetime through forward and
backward for the peak. Symbolic input sizes give expressions, evaluable with `subs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...autograd import grad_mode
from ...autograd.engine import backward as _backward
from ...device import meta
from ...errors import ShapeflowError
from ...ops import base
from ...ops.nn.recurrent import RECURRENT_GATES
from ...tensor import Tensor
from .. import trace as _trace
from ..meta import meta_copy
from .precision import PRECISIONS, WEIGHT_COPIES, is_weight_copy
from .tracker import LiveTracker, Max, Peak

KINDS = (base.LAYER_INPUT, base.ATTENTION, base.ATTENTION_OUTPUT, base.ACTIVATION_INPUT,
         base.DROPOUT_MASK, base.NORM_STATS, RECURRENT_GATES, WEIGHT_COPIES, base.OTHER)


class MemoryPlanError(ShapeflowError, ValueError):
    """A memory report or plan was asked for with arguments that do not fit."""

    kind = "MemoryPlanError"


@dataclass
class ModuleRow:
    """One module of the model: saved activations and parameters, children included."""

    path: str
    kind: str
    depth: int
    activations: object = 0
    params: int = 0  # bytes
    by_kind: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"ModuleRow({self.path or '<model>'}: {self.kind}, activations={self.activations})"


@dataclass
class SavedStorage:
    """One storage kept for backward: its bytes, kind and whether tensor parallelism splits it."""

    nbytes: object
    kind: str
    sharded: bool
    path: str


@dataclass
class ParamInfo:
    """One parameter (tied ones once): what it costs and how parallelism can split it."""

    name: str
    numel: int
    nbytes: int
    reached: bool
    state_bytes: int  # optimizer state (fp32 master weights included under mixed precision)
    shardable: bool  # a Linear or Embedding weight, split by tensor parallelism
    trainable: bool = True  # requires grad (DDP's buckets and ZeRO's slices hold its grad)


@dataclass
class MemoryReport:
    """What a training (or inference) step of a model holds, in bytes."""

    model: str
    mode: str
    precision: str
    optimizer: str
    params: int
    grads: int
    optimizer_state: int
    activations: object
    inputs: object
    peak: object  # everything live at the busiest moment of the step (simulated)
    inference_peak: object
    by_kind: dict
    by_module: list
    unreached: list
    saved: list = field(repr=False, default_factory=list)
    param_info: list = field(repr=False, default_factory=list)
    checkpoint: str = ""
    activations_without_checkpoint: object = None  # without the recomputation asked for
    recompute: str = "none"  # "none", "selective" (attention cores) or "full" (blocks)
    attention: str = "flash"  # the attention kernel traced: "flash" (O(L)) or "math" (P kept)
    timeline: list = field(default_factory=list)  # Phase per forward, backward, step
    after_backward: object = 0  # live above the baseline once backward is over
    # the step traced again with hooks on the meta parameters (data-parallel plans)
    rerun: object = field(default=None, repr=False, compare=False)

    @property
    def peak_phase(self):
        """The Phase (forward, backward, optimizer step) the peak falls in; None if symbolic."""
        from .timeline import peak_phase

        return peak_phase(self.timeline, self.peak)

    @property
    def total(self):
        """params + grads + optimizer state + saved activations."""
        return self.params + self.grads + self.optimizer_state + self.activations

    @property
    def baseline(self):
        """What is held before a step starts: parameters, optimizer state and the inputs."""
        return self.params + self.optimizer_state + self.inputs

    @property
    def param_count(self) -> int:
        return sum(p.numel for p in self.param_info)

    def row(self, path: str) -> ModuleRow:
        """The by_module row of a module path ("" is the whole model)."""
        for r in self.by_module:
            if r.path == path:
                return r
        raise KeyError(f"no module {path!r} ran in this report")

    def subs(self, **values) -> MemoryReport:
        """The report at given sizes of its symbolic dims (B=32, L=1024)."""
        def at(x):
            return x.subs(**values) if hasattr(x, "subs") else x

        rows = [replace(r, activations=at(r.activations),
                        by_kind={k: at(v) for k, v in r.by_kind.items()}) for r in self.by_module]
        return replace(self, activations=at(self.activations), inputs=at(self.inputs),
                       peak=at(self.peak), inference_peak=at(self.inference_peak),
                       by_kind={k: at(v) for k, v in self.by_kind.items()}, by_module=rows,
                       saved=[replace(s, nbytes=at(s.nbytes)) for s in self.saved],
                       activations_without_checkpoint=at(self.activations_without_checkpoint),
                       timeline=[p.subs(**values) for p in self.timeline],
                       after_backward=at(self.after_backward),
                       rerun=None if self.rerun is None else (
                           lambda install=None, shard=None, f=self.rerun: {
                               k: at(v) for k, v in f(install, shard).items()}))

    def plan(self, devices: int = 1, zero: int = 0, tensor_parallel: int = 1,
             sequence_parallel: bool = False, bucket_cap_mb: float = 25):
        """Per-device memory with ZeRO stage `zero` and tensor/sequence parallelism (data
        parallel: DDP's or ZeRO-2's gradient buckets of `bucket_cap_mb`)."""
        from .parallel import plan

        return plan(self, devices, zero, tensor_parallel, sequence_parallel, bucket_cap_mb)

    def __str__(self) -> str:
        from .display import render_report

        return render_report(self)

    def __rich_console__(self, console, options):
        """Printed by rich (`console.print(rep)`): the tables fit the console's width."""
        from .display import report_parts

        yield from report_parts(self)

    def _repr_html_(self) -> str:
        """The tables as HTML, for notebooks."""
        from ..render import to_html
        from .display import report_parts

        return to_html(report_parts(self))

    def plot(self, path) -> None:
        """A stacked bar chart of train vs inference by component (PNG, SVG, PDF)."""
        from .display import plot_report

        plot_report(self, path)


# ---- the run ------------------------------------------------------------------------------
def report(model, *inputs, loss_fn=None, target=None, optimizer=None, mode: str = "train",
           precision: str = "fp32", checkpoint=None, recompute: str | None = None,
           attention: str | None = None, **kwargs) -> MemoryReport:
    """Memory of one step of `model(*inputs, **kwargs)`, traced on the meta device.

    `loss_fn(output, target)` (or `loss_fn(output)` without a target; default: a scalar the
    model returns, else output.sum()), e.g. `loss_fn=F.cross_entropy, target=y`;
    `optimizer`: an Optimizer (instance or class) or "sgd", "momentum", "adam", "adamw";
    `precision`: "fp32"; "bf16-mixed" or "fp16-mixed" (the step under sf.autocast: fp32
    weights, grads and state, 16-bit weight copies for the step and 16-bit activations where
    ops run in 16 bits); "bf16-true" or "fp16-true" (16-bit weights, grads and activations,
    fp32 master weights and optimizer state, as Megatron and ZeRO count); `checkpoint`: True
    for every block of every ModuleList, module paths, or a module class, recomputed in
    backward;
    `recompute`: "none", "selective" (attention cores) or "full" (checkpoint=True);
    `attention`: the kernel scaled_dot_product_attention runs, "flash" (saves the output and
    the row logsumexp) or "math" (saves the probabilities; what Korthikanti et al. count);
    default: the one that would run now (flash, unless an sdpa_kernel block says otherwise).
    """
    from ...ops.nn import flash_attention as fa

    if attention is None:
        attention = "flash" if fa.allowed.backends[:1] == (fa.SDPBackend.FLASH_ATTENTION,) \
            else "math"
    if attention not in ("flash", "math"):
        raise MemoryPlanError(f"memory.report: attention must be 'flash' or 'math', got "
                              f"{attention!r}")
    old, fa.allowed.backends = fa.allowed.backends, fa.as_backends(attention)
    try:
        rep = _report(model, inputs, loss_fn, target, optimizer, mode, precision, checkpoint,
                      recompute, kwargs)
    finally:
        fa.allowed.backends = old
    rep.attention = attention
    return rep


def _report(model, inputs, loss_fn, target, optimizer, mode, precision, checkpoint,
            recompute, kwargs) -> MemoryReport:
    from . import modes
    from .data_parallel import rerun
    from .step import optimizer_name, optimizer_states, step_scratch
    from .timeline import BACKWARD, FORWARD, STEP, Phase

    if mode not in ("train", "inference"):
        raise MemoryPlanError(f"memory.report: mode must be 'train' or 'inference', got "
                              f"{mode!r}")
    if precision not in PRECISIONS:
        raise MemoryPlanError(f"memory.report: precision must be one of "
                              f"{', '.join(PRECISIONS)}, got {precision!r}")
    recompute, checkpoint = modes.resolve(recompute, checkpoint)
    low, how = PRECISIONS[precision]
    half = low if how == "true" else None  # what weights and inputs are held in
    amp = low if how == "mixed" else None  # what autocast runs the listed ops in
    named = list(model.named_parameters())  # tied parameters once
    states = optimizer_states(optimizer, model, named)
    train = mode == "train"
    loss = (loss_fn, target)
    asked = recompute if train else "none"
    run = _simulate(model, inputs, kwargs, loss, half, train, asked, checkpoint, amp=amp)
    infer = run if not train else _simulate(model, inputs, kwargs, loss, half, False, "none",
                                            None, amp=amp)
    without = None
    if asked != "none":
        without = _simulate(model, inputs, kwargs, loss, half, True, "none", None,
                            backward=False, amp=amp)["activations"]

    infos, params_b, grads_b, state_b = [], 0, 0, 0
    for name, p in named:
        item = _itemsize(p, half)
        reached = train and p.requires_grad and name not in run["unreached"]
        state = 0
        if reached:
            per = states(name, p)
            state = per * p.numel() * (4 if half is not None else item)
            if half is not None:
                state += 4 * p.numel()  # the fp32 master copy the update writes
        infos.append(ParamInfo(name, p.numel(), p.numel() * item, reached, state,
                               name in run["shardable"], p.requires_grad))
        params_b += p.numel() * item
        grads_b += p.numel() * item if reached else 0
        state_b += state
    buffers = sum(b.nbytes for b in model.buffers())
    inputs_b = sum(x.nbytes for x in inputs if isinstance(x, Tensor))
    held = params_b + buffers + inputs_b
    rows = run["rows"]
    for r in rows:
        r.params = _module_param_bytes(model, r.path, half)
    phases = run["phases"]
    timeline = [Phase(FORWARD, _plus(phases[FORWARD].peak.value, held + state_b),
                      phases[FORWARD].where)]
    peak = Peak()
    for c in (run["peak"].terms if isinstance(run["peak"], Max) else [run["peak"]]):
        peak.add(c)
    if train:
        timeline.append(Phase(BACKWARD, _plus(phases[BACKWARD].peak.value, held + state_b),
                              phases[BACKWARD].where))
        reached_named = [(i.name, p) for i, (_, p) in zip(infos, named) if i.reached]
        scratch = step_scratch(optimizer, reached_named, half)
        if scratch is not None:  # the update: what backward left, plus its temporaries
            top = run["after_backward"] + scratch.nbytes
            peak.add(top)
            where = f"{scratch.param}: {scratch.why}" if scratch.param else scratch.why
            timeline.append(Phase(STEP, top + held + state_b, where))
    return MemoryReport(
        model=type(model).__name__, mode=mode, precision=precision,
        optimizer=optimizer_name(optimizer), params=params_b + buffers, grads=grads_b,
        optimizer_state=state_b, activations=run["activations"], inputs=inputs_b,
        peak=_plus(peak.value, held + state_b),
        inference_peak=_plus(infer["peak"], held), by_kind=run["by_kind"], by_module=rows,
        unreached=sorted(run["unreached"]) if train else [], saved=run["saved"],
        param_info=infos, checkpoint=modes.checkpoint_name(checkpoint),
        activations_without_checkpoint=without, recompute=asked, timeline=timeline,
        after_backward=run["after_backward"] if train else 0,
        rerun=rerun(model, inputs, kwargs, loss, half, asked, checkpoint, optimizer, named,
                    infos) if train else None)


def _plus(peak, extra):
    return peak + extra if not isinstance(peak, Max) else Max([t + extra for t in peak.terms])


def _simulate(model, inputs, kwargs, loss, half, train: bool, recompute: str,
              checkpoint, backward: bool = True, install=None, amp=None) -> dict:
    """One step on a meta copy: saved storages, rows, peaks above what existed before
    (without `backward`, only what forward saves is meant to be read); forward and loss
    under sf.autocast(dtype=amp) when `amp` is a dtype, as a bf16-mixed training loop."""
    from ...amp.autocast_mode import autocast
    from . import modes
    from .timeline import FORWARD, Locator

    m = meta_copy(model)
    m.train(train)
    if half is not None:
        m.to(half)
    modes.apply(m, recompute, checkpoint)
    undo = install(m) if install is not None else None  # a data-parallel plan's hooks
    memo: dict[int, Tensor] = {}  # one tensor passed twice (idx as its own targets) is one
    args = [_to_meta(x, half, memo) for x in inputs]
    kw = {k: _to_meta(v, half, memo) for k, v in kwargs.items()}
    loss_fn, target = loss[0], _to_meta(loss[1], None, memo)
    named = dict(m.named_parameters())
    param_keys = {id(p._version) for p in named.values()}
    given = list(memo.values())
    external = list(named.values()) + list(m.buffers()) + given
    records: list = []
    sharded: dict[int, bool] = {}
    shardable = _shardable(m)
    tracker = LiveTracker(external)
    locator = Locator(tracker, m)

    def observe(node, node_inputs, out) -> None:
        if locator.in_backward:  # a checkpoint's recomputation: only labelled
            locator.recorded(node, ())
            return
        state = _trace.current_state()
        stack = tuple(state.stack[1:]) if state is not None else ()
        locator.recorded(node, stack)
        flags = tuple(_sharded_of(t, sharded) for t in node_inputs)
        records.append((node, stack, flags))
        sharded[id(node)] = _is_sharded(node, node_inputs, flags)

    with tracker:
        tracker.begin(FORWARD)
        base.add_observer(observe)
        try:
            with grad_mode.set_grad_enabled(train), autocast(
                    "cpu", dtype=amp, enabled=amp is not None):
                out = m(*args, **kw)
                loss = _loss(out, loss_fn, target) if train else None
            saved, rows, by_kind, total = _collect(records, param_keys, sharded, m)
            records.clear()
            if train and backward and loss is not None:
                if not loss.requires_grad:
                    raise MemoryPlanError(
                        "memory.report: the loss does not depend on any parameter that "
                        "requires grad, so a training step computes no gradient",
                        hint="pass mode='inference', or check that the model's parameters "
                        "require grad")
                locator.backward()
                _backward(loss)
        finally:
            base.remove_observer(observe)
        after = tracker.mark()  # what the optimizer step starts from: grads, output, loss
        del out, loss
    if undo is not None:
        undo()
    unreached = {name for name, p in named.items() if p.requires_grad and p.grad is None}
    return {"saved": saved, "rows": rows, "by_kind": by_kind, "activations": total,
            "peak": tracker.peak.value, "unreached": unreached, "phases": tracker.phases,
            "after_backward": after,
            "shardable": {n for n, p in named.items() if id(p) in shardable}}


def _collect(records, param_keys, sharded, model):
    """Unique saved storages, per module (inclusive) and per kind."""
    seen: dict[int, SavedStorage] = {}
    rows: dict[str, ModuleRow] = {"": ModuleRow("", type(model).__name__, 0)}
    row_seen: dict[str, set] = {"": set()}
    kinds = {name: type(mod).__name__ for name, mod in model.named_modules()}
    for node, stack, in_flags in records:
        for p in stack:
            if p not in rows:
                rows[p] = ModuleRow(p, kinds.get(p, "?"), stack.index(p) + 1)
                row_seen[p] = set()
        for entry, t in base.held(node):
            key = id(t._version)
            if key in param_keys:
                continue  # a parameter: inference keeps it too
            s = seen.get(key)
            if s is None:
                size = base.storage_nbytes(t)
                flag = (in_flags[entry.index] if entry.source == base.INPUT else
                        sharded.get(id(node), False))
                kind = WEIGHT_COPIES if is_weight_copy(t, param_keys) else entry.kind
                s = seen[key] = SavedStorage(size, kind, flag, stack[-1] if stack else "")
            for p in ("",) + stack:
                if key not in row_seen[p]:
                    row_seen[p].add(key)
                    r = rows[p]
                    r.activations = r.activations + s.nbytes
                    r.by_kind[s.kind] = r.by_kind.get(s.kind, 0) + s.nbytes
    saved = list(seen.values())
    by_kind = {k: v for k in KINDS if (v := sum(s.nbytes for s in saved if s.kind == k))}
    return saved, list(rows.values()), by_kind, sum(s.nbytes for s in saved)


# ---- tensor-parallel regions (Megatron's split, for plans) ------------------------------
def _sharded_of(t, sharded) -> bool:
    return t.grad_fn is not None and sharded.get(id(t.grad_fn), False)


def _is_sharded(node, inputs, flags) -> bool:
    """Whether a node's output lives split over tensor-parallel ranks (Korthikanti et al.).

    A Linear fed a replicated tensor is column-parallel (its output is split); one fed a
    split tensor is row-parallel (its output, all-reduced, is replicated). Norms and
    embeddings give replicated outputs; every other op keeps its inputs' split.
    """
    name = node.name
    if name == "linear":
        return not flags[0]
    if name in ("layer_norm", "rms_norm", "embedding"):
        return False
    return any(flags)


def _shardable(model) -> set:
    from ...nn.linear import Linear
    from ...nn.sparse import Embedding

    return {id(p) for m in model.modules() if isinstance(m, (Linear, Embedding))
            for p in m.parameters(recurse=False)}


# ---- helpers --------------------------------------------------------------------------------
def _module_param_bytes(model, path: str, half) -> int:
    try:
        mod = model.get_submodule(path) if path else model
    except (AttributeError, KeyError):
        return 0  # a module called that is not registered under the model
    return sum(p.numel() * _itemsize(p, half) for p in mod.parameters())


def _itemsize(p, half) -> int:
    """Bytes per element of a parameter under the precision (16-bit floats when mixed)."""
    return half.itemsize if half is not None and p.dtype.is_floating_point else p.dtype.itemsize


def _to_meta(x, half, memo: dict):
    if not isinstance(x, Tensor):
        return x
    if id(x) in memo:
        return memo[id(x)]
    t = x if x.device is meta else x.to("meta")  # the plan runs on meta itself
    if half is not None and t.dtype.is_floating_point:
        t = t.to(half)
    memo[id(x)] = t = t.detach() if t.requires_grad and t.grad_fn is not None else t
    return t


def _loss(out, loss_fn, target):
    if loss_fn is not None:
        loss = loss_fn(out) if target is None else loss_fn(out, target)
        if not isinstance(loss, Tensor):
            raise MemoryPlanError(f"memory.report: loss_fn returned {type(loss).__name__}, "
                                  "not a tensor")
        return loss if loss.numel() == 1 else loss.sum()
    if isinstance(out, Tensor):
        return out if out.ndim == 0 else out.sum()
    items = list(out.values()) if isinstance(out, dict) else list(out) if isinstance(
        out, (tuple, list)) else []
    for v in items:  # a model that returns its loss (GPT(idx, targets))
        if isinstance(v, Tensor) and v.ndim == 0 and v.dtype.is_floating_point:
            return v
    for v in items:
        if isinstance(v, Tensor) and v.dtype.is_floating_point:
            return v.sum()
    raise MemoryPlanError("memory.report: the model returned no tensor to train on",
                          hint="pass loss_fn=lambda out: ...")
