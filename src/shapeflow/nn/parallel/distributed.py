"""DistributedDataParallel: one model replica per rank, gradients averaged over the ranks.

At wrap time rank 0's parameters and buffers are broadcast. Gradients travel in buckets
(about `bucket_cap_mb` each, in the order backward produces them: last layers first): a
parameter's post-accumulate hook marks it ready, and a full bucket starts its non-blocking
all-reduce while backward goes on. The last bucket's hook waits for all of them, divides by
the world size and writes the averages back into each `.grad`.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ...distributed import group as _group
from ...distributed.collectives import broadcast
from ...distributed.group import DistributedError
from ...tensor import Tensor, from_numpy
from ..module import Module


class _Bucket:
    """Parameters whose gradients are all-reduced together, in one flat buffer."""

    def __init__(self, params: list, dtype) -> None:
        self.params = params
        self.sizes = [int(np.prod(p.shape)) for p in params]
        # MPI has no 16-bit floats: those gradients travel as float32
        wide = dtype.is_floating_point and dtype.itemsize < 4
        self.buffer = np.zeros(sum(self.sizes), np.float32 if wide else dtype.np)
        self.ready = 0
        self.request = None

    def fill(self) -> None:
        off = 0
        for p, n in zip(self.params, self.sizes):
            if p.grad is None:
                self.buffer[off:off + n] = 0
            else:
                self.buffer[off:off + n] = p.grad._data.reshape(-1)
            off += n

    def write_back(self, world_size: int) -> None:
        self.buffer /= world_size
        off = 0
        for p, n in zip(self.params, self.sizes):
            avg = self.buffer[off:off + n].reshape(p.shape)
            if p.grad is None:
                p.grad = from_numpy(avg.astype(p.dtype.np, copy=True))
            else:
                p.grad._data[...] = avg
                p.grad._version[0] += 1
            off += n


class DistributedDataParallel(Module):
    """Wrap `module` so backward averages its gradients over all ranks (as torch's DDP)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None,
                 bucket_cap_mb: float = 25, find_unused_parameters: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False) -> None:
        super().__init__()
        comm = _group._comm()
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self._comm = comm
        self._world_size = comm.Get_size()
        for t in list(module.parameters()) + list(module.buffers()):
            broadcast(t, 0)  # every replica starts from rank 0's weights
        params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = _make_buckets(params, bucket_cap_mb)
        self._bucket_of = {id(p): b for b in self._buckets for p in b.params}
        self._launched = 0
        self._expect_reduction = False
        self._handles = [p.register_post_accumulate_grad_hook(self._grad_ready) for p in params]

    def forward(self, *args, **kwargs):
        started = any(b.ready for b in self._buckets)
        if self._expect_reduction and started and self._launched < len(self._buckets):
            raise DistributedError(
                "DistributedDataParallel: the previous backward did not produce gradients "
                f"for every parameter ({self._launched} of {len(self._buckets)} buckets "
                "were reduced)", hint="pass find_unused_parameters=True if some parameters "
                "take no part in the loss")
        if self.broadcast_buffers and self._world_size > 1:
            for b in self.module.buffers():
                broadcast(b, 0)
        self._reset()
        out = self.module(*args, **kwargs)
        self._expect_reduction = self.require_backward_grad_sync and self.training
        if self._expect_reduction and self.find_unused_parameters:
            self._mark_unused(out)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside accumulates local gradients only; the next synced one averages."""
        old, self.require_backward_grad_sync = self.require_backward_grad_sync, False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def _reset(self) -> None:
        for b in self._buckets:
            b.ready, b.request = 0, None
        self._launched = 0

    def _mark_unused(self, out) -> None:
        """Parameters the output does not depend on count as ready (their gradient: zero)."""
        reached = _reachable_leaves(out)
        for b in self._buckets:
            for p in b.params:
                if id(p) not in reached:
                    self._grad_ready(p)

    def _grad_ready(self, param) -> None:
        # only for a backward through this wrapper's forward (as torch's reducer: the module
        # itself, called directly, trains locally)
        if not self._expect_reduction:
            return
        bucket = self._bucket_of[id(param)]
        bucket.ready += 1
        if bucket.ready < len(bucket.params):
            return
        bucket.fill()
        MPI = _group.world.MPI
        bucket.request = self._comm.Iallreduce(MPI.IN_PLACE, bucket.buffer, MPI.SUM)
        self._launched += 1
        if self._launched == len(self._buckets):
            n = len(self._buckets)
            for i, b in enumerate(self._buckets):  # bounded waits: a lost rank raises
                _group.wait(b.request, "DistributedDataParallel: the gradients' all_reduce "
                            f"(bucket {i + 1} of {n})")
            for b in self._buckets:
                b.write_back(self._world_size)
            self._expect_reduction = False


def _make_buckets(params: list, cap_mb: float) -> list[_Bucket]:
    """Buckets of about cap_mb, one dtype each, in reverse registration order."""
    cap = cap_mb * 2**20
    buckets, current, size = [], [], 0
    for p in reversed(params):
        nbytes = int(np.prod(p.shape)) * p.dtype.itemsize
        if current and (size + nbytes > cap or p.dtype is not current[0].dtype):
            buckets.append(_Bucket(current, current[0].dtype))
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        buckets.append(_Bucket(current, current[0].dtype))
    return buckets


def _reachable_leaves(out) -> set[int]:
    """ids of the leaf tensors the graph behind `out` (tensors, tuples, dicts) reaches."""
    roots, stack = [], [out]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            roots.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    found, seen = set(), set()
    nodes = [t.grad_fn for t in roots if t.grad_fn is not None]
    found.update(id(t) for t in roots if t.grad_fn is None)
    while nodes:
        node = nodes.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for nxt in node.next[0::3]:
            if isinstance(nxt, Tensor):
                found.add(id(nxt))
            elif nxt is not None:
                nodes.append(nxt)
    return found
