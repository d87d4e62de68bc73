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

import numpy as np

from ..optim.optimizer import Optimizer
from ..tensor import Tensor, from_numpy
from .gradients import ShardedGradients
from .group import DistributedError, _comm, world


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
            self.flat[lo:hi] = p.data.reshape(-1)
            self.views.append(self.flat[lo:hi].reshape(p.shape))
            p.data = self.views[-1]
        comm.Bcast(self.flat.view(np.uint8), root=0)  # every replica starts from rank 0's
        lo = rank * self.per_rank
        self.param = from_numpy(self.flat[lo:lo + self.per_rank]).requires_grad_()

    def relink(self) -> None:
        """Parameters whose data something replaced (`.to()`, an assignment): their values
        move into the flat buffer, and they view it again."""
        for i, p in enumerate(self.params):
            if p.data is not self.views[i]:
                self.views[i][...] = p.data
                p.data = self.views[i]

    def slice_grads(self) -> np.ndarray:
        """This rank's slice of the full (DDP-averaged) gradients, copied from each .grad."""
        out = np.zeros(self.per_rank, self.flat.dtype)
        mine = self.rank * self.per_rank
        for p, lo, hi in zip(self.params, self.offsets, self.offsets[1:]):
            a, b = max(lo, mine), min(hi, mine + self.per_rank)
            if a < b and p.grad is not None:
                out[a - mine:b - mine] = p.grad.data.reshape(-1)[a - lo:b - lo]
        return out

    def all_gather(self) -> None:
        """Every rank's updated slice into every rank's parameters (MPI's in-place form)."""
        world.comm.Allgather(world.MPI.IN_PLACE, self.flat.view(np.uint8))
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
                    p.grad.data[...] = 0
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
            for v in state.values():
                if isinstance(v, Tensor) and v.data is not None and v.data.size > 1:
                    total += v.data.nbytes
        return total

    def gradient_bytes(self) -> int:
        """Bytes of gradients this rank holds now (stage 2 after backward: its slices only)."""
        full = sum(p.grad.data.nbytes for s in self._shards for p in s.params
                   if p.grad is not None)
        return full + sum(s.param.grad.data.nbytes for s in self._shards
                          if s.param.grad is not None)

    def consolidate_state_dict(self, to: int = 0) -> None:
        """Gather every rank's optimizer state on rank `to`, for `state_dict()` there."""
        mine = self.optim.state_dict()
        arrays = {(i, k): v for i, st in mine["state"].items() for k, v in st.items()}
        self._consolidated = None
        full = {}
        for (i, k), v in sorted(arrays.items()):
            data = v.data if isinstance(v, Tensor) else np.asarray(v)
            if data.size <= 1:  # step counters: the same on every rank
                full[(i, k)] = v
                continue
            out = np.empty(self.world_size * data.size, data.dtype) if self.rank == to else None
            self._comm.Gather(np.ascontiguousarray(data), out, root=to)
            if self.rank == to:
                full[(i, k)] = from_numpy(out[:self._shards[i].numel].copy())
        if self.rank == to:
            state = {}
            for (i, k), v in full.items():
                state.setdefault(i, {})[k] = v
            self._consolidated = {"state": state, "param_groups": mine["param_groups"]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a consolidated state_dict (any rank's copy of rank `to`'s): each rank keeps
        its own slice of every flat state buffer."""
        state = {}
        for i, values in state_dict["state"].items():
            shard = self._shards[int(i)]
            lo = self.rank * shard.per_rank
            state[i] = {}
            for k, v in values.items():
                data = v.data if isinstance(v, Tensor) else np.asarray(v)
                if data.size <= 1:  # step counters
                    state[i][k] = v
                    continue
                if data.size != shard.numel:
                    raise DistributedError(
                        f"ZeroRedundancyOptimizer.load_state_dict: state {k!r} of group {i} "
                        f"has {data.size} elements, the group's parameters {shard.numel}",
                        hint="load a state_dict saved by consolidate_state_dict() for the "
                        "same parameters")
                full = np.zeros(shard.per_rank * self.world_size, data.dtype)
                full[:data.size] = data.reshape(-1)
                state[i][k] = from_numpy(full[lo:lo + shard.per_rank].copy())
        self.optim.load_state_dict({"state": state,
                                    "param_groups": state_dict["param_groups"]})

    def state_dict(self) -> dict:
        """The whole optimizer's state (flat per group), after consolidate_state_dict()."""
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
