"""ZeroRedundancyOptimizer: each rank keeps the optimizer state of one shard of the parameters.

ZeRO (Rajbhandari et al. 2020), as DeepSpeed lays it out: each parameter group's
parameters are flattened into one buffer, padded to a multiple of the world size, and rank
r owns the r-th equal slice. Its local optimizer sees that slice as a single parameter, so
its state is 1/N of the whole (stage 1). With `stage=2` the gradients are reduce-scattered
at the step instead of all-reduced by DDP, so each rank keeps only its slice of them.
After the local update every rank all-gathers the slices back into the full parameters.
"""

from __future__ import annotations

import numpy as np

from ..optim.optimizer import Optimizer
from ..tensor import Tensor, from_numpy
from .group import DistributedError, _comm, world


class _Shard:
    """One parameter group, flattened: the full buffer and this rank's slice of it."""

    def __init__(self, params: list, rank: int, size: int) -> None:
        dtypes = {p.dtype for p in params}
        if len(dtypes) != 1:
            raise DistributedError(
                "ZeroRedundancyOptimizer: a parameter group mixes dtypes "
                f"({', '.join(sorted(map(str, dtypes)))})",
                hint="put parameters of each dtype in their own group")
        self.params = params
        self.sizes = [p.numel() for p in params]
        self.numel = sum(self.sizes)
        self.per_rank = -(-self.numel // size)  # ceil: padded so every slice has one size
        dtype = params[0].dtype
        self.flat = np.zeros(self.per_rank * size, dtype.np)
        self.rank_slice = slice(rank * self.per_rank, (rank + 1) * self.per_rank)
        self.gather_params()
        self.param = from_numpy(self.flat[self.rank_slice].copy()).requires_grad_()

    def gather_params(self) -> None:
        off = 0
        for p, n in zip(self.params, self.sizes):
            self.flat[off:off + n] = p.data.reshape(-1)
            off += n

    def flat_grads(self) -> np.ndarray:
        grads = np.zeros_like(self.flat)
        off = 0
        for p, n in zip(self.params, self.sizes):
            if p.grad is not None:
                grads[off:off + n] = p.grad.data.reshape(-1)
            off += n
        return grads

    def scatter_back(self) -> None:
        off = 0
        for p, n in zip(self.params, self.sizes):
            p.data[...] = self.flat[off:off + n].reshape(p.shape)
            p._version[0] += 1
            off += n


class ZeroRedundancyOptimizer:
    """Wrap `optimizer_class` so each rank keeps 1/world_size of its state (ZeRO stage 1, 2)."""

    def __init__(self, params, optimizer_class: type[Optimizer], process_group=None,
                 parameters_as_bucket_view: bool = False, overlap_with_ddp: bool = False,
                 *, stage: int = 1, **defaults) -> None:
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
            shard = _Shard(ps, self.rank, self.world_size)
            self._shards.append(shard)
            local_groups.append({**{k: v for k, v in g.items() if k != "params"},
                                 "params": [shard.param]})
        self.optim = optimizer_class(local_groups, **defaults)
        self.param_groups = self.optim.param_groups  # schedulers set lr here
        self.defaults = self.optim.defaults

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

    def step(self, closure=None):
        """Update this rank's slices, then all-gather the updated parameters."""
        loss = closure() if closure is not None else None
        MPI = world.MPI
        for shard in self._shards:
            grads = shard.flat_grads()
            if self.stage == 2:  # the sum of every rank's gradients, this rank's slice only
                mine = np.empty(shard.per_rank, grads.dtype)
                self._comm.Reduce_scatter_block(grads, mine, MPI.SUM)
                mine /= self.world_size
                for p in shard.params:
                    p.grad = None  # the full gradients are not kept: that is stage 2
            else:  # DDP already averaged them on every rank
                mine = grads[shard.rank_slice].copy()
            shard.param.grad = from_numpy(mine)
        self.optim.step()
        for shard in self._shards:
            if self.stage == 1:  # its slice was a copy of the full (kept) gradients
                shard.param.grad = None
            self._comm.Allgather(shard.param.data, shard.flat)
            shard.scatter_back()
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
        """Bytes of gradients this rank holds now (stage 2 after a step: its slices only)."""
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

    def state_dict(self) -> dict:
        """The whole optimizer's state (flat per group), after consolidate_state_dict()."""
        if getattr(self, "_consolidated", None) is None:
            raise DistributedError(
                "ZeroRedundancyOptimizer.state_dict: no consolidated state on this rank",
                hint="call consolidate_state_dict(to=r) on every rank, then state_dict() on r")
        return self._consolidated
