"""Per-device plans: ZeRO stages (Rajbhandari et al. 2020) and tensor/sequence parallelism
(Korthikanti et al. 2022), applied to the numbers a report traced.

ZeRO over the data-parallel degree d: stage 1 splits optimizer state, stage 2 also the
gradients, stage 3 also the parameters. Tensor parallelism over t splits Linear and
Embedding weights, and the activations inside the column/row-parallel regions; the rest
(norm inputs and statistics, the inputs of column-parallel layers, dropout masks on the
residual stream) stays replicated unless sequence parallelism splits it too (Table 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .report import MemoryPlanError


@dataclass
class Plan:
    """Bytes per device for one parallel layout."""

    devices: int
    zero: int
    tensor_parallel: int
    sequence_parallel: bool
    params: float
    grads: float
    optimizer_state: float
    activations: object
    comm_buffers: object = 0  # DDP's gradient buckets, kept beside the gradients
    peak: object = None  # everything live at the busiest moment on one rank (data parallel)
    baseline: object = None  # what a rank holds between steps (parameters, state, buckets)

    @property
    def data_parallel(self) -> int:
        return self.devices // self.tensor_parallel

    @property
    def model_states(self) -> float:
        """params + grads + optimizer state (what ZeRO partitions)."""
        return self.params + self.grads + self.optimizer_state

    @property
    def total(self):
        return self.model_states + self.activations + self.comm_buffers

    def __str__(self) -> str:
        from .display import render_plan

        return render_plan(self)

    def __rich_console__(self, console, options):
        """Printed by rich: the table fits the console's width."""
        from .display import plan_parts

        yield from plan_parts(self)

    def _repr_html_(self) -> str:
        """The table as HTML, for notebooks."""
        from ..render import to_html
        from .display import plan_parts

        return to_html(plan_parts(self))


def _zero_slice(nbytes: float, numel: float, d: int) -> float:
    """One device's ZeRO slice: the flat buffer padded to a multiple of d elements, split in d
    (as DeepSpeed and shapeflow.distributed.optim lay it out)."""
    if d == 1 or numel == 0 or numel != int(numel):
        return nbytes / d
    return math.ceil(numel / d) * (nbytes / numel)


def plan(rep, devices: int = 1, zero: int = 0, tensor_parallel: int = 1,
         sequence_parallel: bool = False, bucket_cap_mb: float = 25) -> Plan:
    """The per-device memory of `rep`'s step on `devices` devices; its peak for data
    parallelism as shapeflow.distributed runs it (DDP, ZeRO-1 under DDP, ZeRO-2 alone)."""
    if zero not in (0, 1, 2, 3):
        raise MemoryPlanError(f"memory plan: ZeRO stage must be 0, 1, 2 or 3, got {zero}")
    if devices < 1 or tensor_parallel < 1 or devices % tensor_parallel:
        raise MemoryPlanError(
            f"memory plan: {devices} devices cannot hold tensor-parallel groups of "
            f"{tensor_parallel}", hint="devices must be a multiple of --tensor-parallel")
    if sequence_parallel and tensor_parallel == 1:
        raise MemoryPlanError("memory plan: sequence parallelism splits within a tensor-"
                              "parallel group; pass tensor_parallel > 1")
    t, d = tensor_parallel, devices // tensor_parallel
    params = grads = state = 0.0
    numel = reached = 0.0
    for p in rep.param_info:
        split = t if p.shardable else 1
        params += p.nbytes / split
        numel += p.numel / split
        if p.reached:
            grads += p.nbytes / split
            state += p.state_bytes / split
            reached += p.numel / split
    if zero >= 1:
        state = _zero_slice(state, reached, d)
    if zero >= 2:
        grads = _zero_slice(grads, reached, d)
    if zero >= 3:
        params = _zero_slice(params, numel, d)
    acts = 0
    for s in rep.saved:
        acts = acts + (s.nbytes / t if s.sharded or sequence_parallel else s.nbytes)
    comm = peak = held = None
    if t == 1 and zero < 3 and rep.rerun is not None:
        from .data_parallel import data_parallel

        peak, held, comm, params = data_parallel(rep, d, zero, bucket_cap_mb)
    return Plan(devices, zero, t, sequence_parallel, params, grads, state, acts, comm or 0,
                peak, held)
