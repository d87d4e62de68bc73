"""ZeroRedundancyOptimizer: each rank keeps the optimizer state of one shard of the parameters.

ZeRO (Rajbhandari et al. 2020), as DeepSpeed lays it out: each parameter group's
parameters become views into one flat buffer, padded to a multiple of the world size, and
rank r owns the r-th equal slice. Its local optimizer sees that slice (a view too) as a
single parameter, so its state is 1/N of the whole (stage 1, under DDP). With `stage=2` the
optimizer takes DDP's place: backward reduce-scatters the gradients in buckets as they
become ready (`gradients.py`), so after backward each rank holds only its slice of them.
After the local update every rank all-gathers the slices, in place, into the parameters.
"""

from __future__ import annotations

import copy

import numpy as np

from ..optim.optimizer import Optimizer, _as_array
from ..tensor import Tensor, from_numpy
from .gradients import ShardedGradients
from .group import DistributedError, _comm, wait, world


class _Shard:
    """One parameter group, flattened: the parameters are views of `flat`; `param` is this
    rank's slice of it (a view too), which the local optimizer updates."""

    def __init__(self, params: list, rank: int, size: int, comm) -> None:
        dtypes = {p.dtype for p in params}
        if len(dtypes) != 1:
            raise DistributedError(
                "ZeroRedundancyOptimizer: a parameter group mixes dtypes "
                f"({', '.join(sorted(map(str, dtypes)))})",
                hint="put parameters of each dtype in their own group")
        self.params = params
        self.sizes = [p.numel() for p in params]
        self.offsets = np.cumsum([0] + self.sizes).tolist()
        self.numel = self.offsets[-1]
        self.per_rank = -(-self.numel // size)  # ceil: padded so every slice has one size
        self.rank = rank
        self.flat = np.zeros(self.per_rank * size, params[0].dtype.np)
        self.views: list[np.ndarray] = []
        for p, lo, hi in zip(params, self.offsets, self.offsets[1:]):
            self.flat[lo:hi] = p._data.reshape(-1)
            self.views.append(self.flat[lo:hi].reshape(p.shape))
            p._data = self.views[-1]
        # every replica starts from rank 0's
        wait(comm.Ibcast(self.flat.view(np.uint8), root=0),
             "ZeroRedundancyOptimizer: the parameters' broadcast")
        lo = rank * self.per_rank
        self.param = from_numpy(self.flat[lo:lo + self.per_rank]).requires_grad_()

    def relink(self) -> None:
        """Parameters whose data something replaced (`.to()`, an assignment): their values
        move into the flat buffer, and they view it again."""
        for i, p in enumerate(self.params):
            if p._data is not self.views[i]:
                self.views[i][...] = p._data
                p._data = self.views[i]

    def slice_grads(self) -> np.ndarray:
        """This rank's slice of the full (DDP-averaged) gradients, copied from each .grad."""
        out = np.zeros(self.per_rank, self.flat.dtype)
        mine = self.rank * self.per_rank
        for p, lo, hi in zip(self.params, self.offsets, self.offsets[1:]):
            a, b = max(lo, mine), min(hi, mine + self.per_rank)
            if a < b and p.grad is not None:
                out[a - mine:b - mine] = p.grad._data.reshape(-1)[a - lo:b - lo]
        return out

    def all_gather(self) -> None:
        """Every rank's updated slice into every rank's parameters (MPI's in-place form)."""
        wait(world.comm.Iallgather(world.MPI.IN_PLACE, self.flat.view(np.uint8)),
             "ZeroRedundancyOptimizer.step: the parameters' all_gather")
        for p in self.params:
            p._version[0] += 1


class ZeroRedundancyOptimizer:
    """Wrap `optimizer_class` so each rank keeps 1/world_size of its state (ZeRO stage 1, 2).

    Stage 1 runs under DistributedDataParallel (which averages the full gradients); stage 2
    replaces it: do not wrap the model in DDP, backward reduce-scatters each bucket of about
    `bucket_cap_mb` of gradients and frees them, keeping this rank's slice only.
    """

    def __init__(self, params, optimizer_class: type[Optimizer], process_group=None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False,
                 *, stage: int = 1, bucket_cap_mb: float = 25, **defaults) -> None:
        if stage not in (1, 2):
            raise DistributedError(f"ZeroRedundancyOptimizer: stage must be 1 or 2, got {stage}",
                                   hint="stage 3 (sharded parameters) is not implemented")
        comm = _comm()
        self._comm, self.stage = comm, stage
        self.rank, self.world_size = comm.Get_rank(), comm.Get_size()
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self._shards: list[_Shard] = []
        local_groups = []
        for g in groups:
            ps = [g["params"]] if isinstance(g["params"], Tensor) else list(g["params"])
            if stage == 2:
                _refuse_ddp(ps)
            shard = _Shard(ps, self.rank, self.world_size, comm)
            self._shards.append(shard)
            local_groups.append({**{k: v for k, v in g.items() if k != "params"},
                                 "params": [shard.param]})
        self.optim = optimizer_class(local_groups, **defaults)
        self.param_groups = self.optim.param_groups  # schedulers set lr here
        self.defaults = self.optim.defaults
        self._grads = ShardedGradients(self._shards, comm, bucket_cap_mb) if stage == 2 \
            else None

    @property
    def state(self):
        return self.optim.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        for shard in self._shards:
            shard.param.grad = None
            for p in shard.params:
                if set_to_none or p.grad is None:
                    p.grad = None
                else:
                    p.grad._data[...] = 0
        if self._grads is not None:
            self._grads.zero()

    def step(self, closure=None):
        """Update this rank's slices, then all-gather the updated parameters."""
        loss = closure() if closure is not None else None
        for shard in self._shards:
            shard.relink()
        if self._grads is not None:  # reduce-scattered in backward; the rest (unused) here
            self._grads.finish()
        else:  # DDP already averaged the full gradients on every rank
            for shard in self._shards:
                shard.param.grad = from_numpy(shard.slice_grads())
        self.optim.step()
        for shard in self._shards:
            if self.stage == 1:  # a copy of the full gradients, which DDP's ranks keep
                shard.param.grad = None
            shard.all_gather()
        return loss

    def state_bytes(self) -> int:
        """Bytes of optimizer state this rank holds (its slices' buffers)."""
        total = 0
        for state in self.optim.state.values():
            for v in state.values():  # buffers are 1-D like the slice, step counters 0-d
                if isinstance(v, Tensor) and v._data is not None and v._data.ndim >= 1:
                    total += v._data.nbytes
        return total

    def gradient_bytes(self) -> int:
        """Bytes of gradients this rank holds now (stage 2 after backward: its slices only)."""
        full = sum(p.grad._data.nbytes for s in self._shards for p in s.params
                   if p.grad is not None)
        return full + sum(s.param.grad._data.nbytes for s in self._shards
                          if s.param.grad is not None)

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's state on rank `to` as the wrapped optimizer's state_dict over
        the original parameters (whole per-parameter buffers, as PyTorch's): any world loads it.
        """
        local = self.optim.state_dict()
        values = [local["state"].get(i, {}) for i in range(len(self._shards))]
        layout = [[(k, _sharded_dtype(k, v, tuple(s.param.shape), ())) for k, v in st.items()]
                  for s, st in zip(self._shards, values)]
        if any(other != layout for other in self._comm.allgather(layout)):
            raise DistributedError(
                "ZeroRedundancyOptimizer.consolidate_state_dict: the ranks hold different "
                "optimizer state (other names or dtypes)",
                hint="call step() the same number of times on every rank before consolidating")
        root = self.rank == to
        self._consolidated = None
        state: dict[int, dict] = {}
        groups, first = [], 0
        for shard, packed, st, names in zip(self._shards, local["param_groups"], values, layout):
            ids = list(range(first, first + len(shard.params)))
            first += len(ids)
            groups.append({**packed, "params": ids})
            for name, dtype in names:
                if dtype is None:  # a step counter (or a number): each parameter gets a copy
                    for j in ids:
                        state.setdefault(j, {})[name] = _copy(st[name])
                    continue
                mine = np.ascontiguousarray(_as_array(st[name]))
                full = np.empty(shard.per_rank * self.world_size, mine.dtype) if root else None
                # as bytes: MPI has no type for bfloat16 and the like
                self._comm.Gather(mine.view(np.uint8), full.view(np.uint8) if root else None,
                                  root=to)
                if root:
                    for j, p, lo, hi in zip(ids, shard.params, shard.offsets,
                                            shard.offsets[1:]):
                        state.setdefault(j, {})[name] = from_numpy(
                            full[lo:hi].reshape(p.shape).copy())
        if root:
            self._consolidated = {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a consolidated state_dict (per parameter, saved on any number of ranks): each
        rank keeps its own slice of every buffer, re-sharded for this world size."""
        op = "ZeroRedundancyOptimizer.load_state_dict"
        groups, saved = state_dict["param_groups"], state_dict["state"]
        have, want = [len(g["params"]) for g in groups], [len(s.params) for s in self._shards]
        if have != want:
            raise DistributedError(
                f"{op}: the state_dict's parameter groups hold {have} parameters, this "
                f"optimizer's {want}",
                hint="load what state_dict() gave after consolidate_state_dict() for the same "
                "parameter groups (or a per-parameter optimizer's state_dict)")
        state = {}
        for i, (g, shard) in enumerate(zip(groups, self._shards)):
            entries = [_entry(saved, j) for j in g["params"]]
            if not any(entries):
                continue  # never stepped: the optimizer creates its state at the first step
            if not all(entries):
                raise DistributedError(
                    f"{op}: group {i} has state for only some of its parameters",
                    hint="ZeRO steps a group's parameters together (one flat shard), so it "
                    "resumes groups whose parameters all have state or none")
            options = {k: v for k, v in g.items() if k != "params"}
            declared = self.optim.state_per_param({**self.optim.param_groups[i], **options})
            state[i] = self._reshard(i, shard, entries, declared, op)
        self.optim.load_state_dict({"state": state, "param_groups": [
            {**{k: v for k, v in g.items() if k != "params"}, "params": [i]}
            for i, g in enumerate(groups)]})

    def _reshard(self, i: int, shard: _Shard, entries: list[dict], declared: list[str],
                 op: str) -> dict:
        """Group i's per-parameter state as this rank's flat slice: buffers concatenated
        (padded) and sliced; step counters, the same for every parameter, kept once."""
        out = {}
        lo = self.rank * shard.per_rank
        for name in entries[0]:
            values = [e.get(name) for e in entries]
            arrays = [_as_array(v) for v in values]
            if not any(_sharded_dtype(name, v, tuple(p.shape), declared) for v, p in
                       zip(values, shard.params)):
                if any(not _same(values[0], v) for v in values[1:]):
                    raise DistributedError(
                        f"{op}: the parameters of group {i} have different {name!r} values",
                        hint=f"ZeRO keeps one {name!r} per group (its parameters step together "
                        "as one flat shard): save and load with the same groups")
                out[name] = values[0]
                continue
            dtype = next(a.dtype for a in arrays if a is not None)  # the optimizer casts it
            full = np.zeros(shard.per_rank * self.world_size, dtype)
            for j, (a, p, a_lo, a_hi) in enumerate(zip(arrays, shard.params, shard.offsets,
                                                       shard.offsets[1:])):
                if a is None or tuple(a.shape) != tuple(p.shape):
                    got = "nothing" if a is None else f"shape {list(a.shape)}"
                    raise DistributedError(
                        f"{op}: state {name!r} of parameter {j} of group {i} has {got}, the "
                        f"parameter has shape {list(p.shape)}",
                        hint="load a state_dict saved for the same parameters")
                full[a_lo:a_hi] = a.reshape(-1)
            out[name] = from_numpy(full[lo:lo + shard.per_rank].copy())
        return out

    def state_dict(self) -> dict:
        """The whole optimizer's state (per parameter, as PyTorch's), after
        consolidate_state_dict()."""
        if getattr(self, "_consolidated", None) is None:
            raise DistributedError(
                "ZeroRedundancyOptimizer.state_dict: no consolidated state on this rank",
                hint="call consolidate_state_dict(to=r) on every rank, then state_dict() on r")
        return self._consolidated


def _refuse_ddp(params: list) -> None:
    """Stage 2 reduce-scatters the gradients itself; DDP would all-reduce them as well."""
    from ..nn.parallel.distributed import DistributedDataParallel

    for p in params:
        for h in p._hooks or ():
            if isinstance(getattr(getattr(h, "fn", None), "__self__", None),
                          DistributedDataParallel):
                raise DistributedError(
                    "ZeroRedundancyOptimizer(stage=2): these parameters belong to a "
                    "DistributedDataParallel model, which all-reduces their gradients",
                    hint="stage 2 reduce-scatters them itself: pass the unwrapped model's "
                    "parameters and do not wrap it in DDP")


def _sharded_dtype(name: str, value, shape: tuple, declared) -> str | None:
    """The dtype of a per-element buffer (sharded like its parameter); None for a step counter
    or a number. Told apart by the optimizer's declared buffer names or by the parameter's
    shape, never by size: a one-element slice is as small as a step counter."""
    arr = _as_array(value)
    if arr is None or not (name in declared or (arr.ndim >= 1 and tuple(arr.shape) == shape)):
        return None
    return str(arr.dtype)


def _copy(value):
    """A copy later steps do not change (the optimizer updates its tensors in place)."""
    if isinstance(value, Tensor):
        return from_numpy(np.array(value._data, copy=True))
    return copy.deepcopy(value)


def _entry(state: dict, index) -> dict | None:
    """state[index], whether its keys are ints or strings (as some formats store them)."""
    keys = [index, str(index)] + ([int(index)] if str(index).isdigit() else [])
    return next((state[k] for k in keys if k in state), None)


def _same(a, b) -> bool:
    x, y = _as_array(a), _as_array(b)
    if x is None or y is None:
        return x is None and y is None and a == b
    return np.array_equal(x, y)
