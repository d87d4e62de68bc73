"""The per-rank peak of data-parallel training as shapeflow.distributed runs it.

DDP keeps persistent gradient buckets (float32 for 16-bit gradients) beside the gradients,
filled and all-reduced in place: its ranks peak where one process does, plus the buckets.
ZeRO's parameters are views of one flat buffer padded to a multiple of the ranks. Stage 1
(under DDP) adds at the step this rank's slice of the gradients and its update's scratch;
stage 2 frees each bucket's gradients during backward once copied into a send buffer, one
bucket in flight at a time, which moves the backward peak: the step is traced again on meta
with hooks that allocate and free what distributed/gradients.py does, with its bucket rule.
What MPI allocates inside itself (C memory, outside Python's allocator) is not counted.
"""

from __future__ import annotations

from ...device import meta
from ...distributed.gradients import bucket_ranges
from ...dtypes import float32
from ...tensor import PostAccumulateHook, Tensor
from .tracker import Max, Peak


def rerun(model, inputs, kwargs, loss, half, recompute, checkpoint, optimizer, named, infos):
    """For data-parallel plans: the step's raw peaks traced again with `install(meta model)`
    hooking its parameters, and the optimizer's scratch for a flat slice of `shard` elements."""
    from .report import _simulate, _to_meta

    memo: dict = {}  # the plan keeps shapes, not the caller's data
    inputs = [_to_meta(x, None, memo) for x in inputs]
    kwargs = {k: _to_meta(v, None, memo) for k, v in kwargs.items()}
    loss = (loss[0], _to_meta(loss[1], None, memo))
    first = next(((i.name, p) for i, (_, p) in zip(infos, named) if i.reached), None)

    def again(install=None, shard=None) -> dict:
        from .step import step_scratch
        from .timeline import BACKWARD, FORWARD

        out = {}
        if install is not None:
            run = _simulate(model, inputs, kwargs, loss, half, True, recompute, checkpoint,
                            install=install)
            out = {"forward": run["phases"][FORWARD].peak.value,
                   "backward": run["phases"][BACKWARD].peak.value,
                   "after_backward": run["after_backward"]}
        if shard is not None and first is not None:
            scratch = step_scratch(optimizer, [first], half, {first[0]: shard})
            out["scratch"] = 0 if scratch is None else scratch.nbytes
        return out
    return again


def _max(*values):
    peak = Peak()
    for v in values:
        for term in (v.terms if isinstance(v, Max) else [v]):
            peak.add(term)
    return peak.value


def _integral(x):
    return int(x) if isinstance(x, float) and x.is_integer() else x


def _plus(v, extra):
    return Max([t + extra for t in v.terms]) if isinstance(v, Max) else v + extra


def _minus(v, less):
    return Max([t - less for t in v.terms]) if isinstance(v, Max) else v - less


def data_parallel(rep, d: int, zero: int, bucket_cap_mb: float) -> tuple:
    """(per-rank peak, what a rank holds between steps, DDP's bucket bytes, parameter bytes)
    on `d` data-parallel ranks with ZeRO stage `zero` (0: DDP; 1: under DDP; 2: alone)."""
    infos = rep.param_info
    plain = sum(i.nbytes for i in infos)
    numel = sum(i.numel for i in infos)
    item = plain // numel if numel else 4
    per = -(-numel // d)
    params = per * d * item if zero else plain
    comm = 0
    if zero < 2 and (d > 1 or zero):  # DDP's buckets, one per gradient (16-bit: as float32)
        comm = sum(i.numel * (4 if i.nbytes == 2 * i.numel else i.nbytes // i.numel)
                   for i in infos if i.trainable)
    from .parallel import _zero_slice

    reached = sum(i.numel for i in infos if i.reached)
    state = _integral(_zero_slice(rep.optimizer_state, reached, d)) if zero else \
        rep.optimizer_state
    base = rep.baseline - plain - rep.optimizer_state + params + state + comm
    has_step = len(rep.timeline) == 3
    if zero == 0:
        return _plus(rep.peak, base - rep.baseline), base, comm, params
    fwd = _minus(rep.timeline[0].peak, rep.baseline)
    if zero == 1:
        bwd, after = _minus(rep.timeline[1].peak, rep.baseline), rep.after_backward
        extra = per * item  # the slice of the averaged gradients the local update reads
    else:
        run = rep.rerun(install=lambda m: _zero_two_on_meta(m, d, bucket_cap_mb))
        bwd, after, extra = run["backward"], run["after_backward"], 0
    raw = _max(fwd, bwd)
    if has_step:
        scratch = rep.rerun(shard=per).get("scratch", 0)
        raw = _max(raw, after + extra + scratch)
    return _plus(raw, base), base, comm, params


def _zero_two_on_meta(m, d: int, cap_mb: float):
    """Hooks on a meta model's parameters doing what ShardedGradients allocates and frees:
    the rank's slice of the gradients, each bucket's send buffer, the gradients dropped."""
    params = list(m.parameters())
    sizes = [p.numel() for p in params]
    per = -(-sum(sizes) // d)
    dtype = params[0].dtype
    wide = dtype.is_floating_point and dtype.itemsize < 4
    buckets = bucket_ranges(sizes, per * d, cap_mb * 2**20 / dtype.itemsize)
    of = {id(params[i]): k for k, (_, _, idx) in enumerate(buckets) for i in idx}
    expected = [sum(params[i].requires_grad for i in idx) for _, _, idx in buckets]
    ready = [0] * len(buckets)
    held: dict = {"slice": None, "inflight": None, "launched": 0}

    def launch(k: int) -> None:
        lo, hi, idx = buckets[k]
        held["inflight"] = None  # waited for: its send buffer is freed
        if held["slice"] is None:
            held["slice"] = Tensor._make(None, (per,), dtype, meta)
        send = Tensor._make(None, (hi - lo,), float32 if wide else dtype, meta)
        for i in idx:
            params[i].grad = None
        mine = max(0, min(hi, per) - lo)  # rank 0's part of the bucket
        recv = Tensor._make(None, (mine,), float32, meta) if wide else None
        held["inflight"] = (send, recv)
        held["launched"] += 1
        if held["launched"] == len(buckets):
            held["inflight"] = None

    def hook(p) -> None:
        k = of[id(p)]
        ready[k] += 1
        if ready[k] == expected[k]:
            launch(k)

    handles = [p.register_post_accumulate_grad_hook(hook) for p in params if p.requires_grad]

    def undo() -> None:
        for h in handles:
            h.remove()
        PostAccumulateHook.registered -= len(handles)  # plain backward needs no leaf watch
        held.clear()
    return undo
