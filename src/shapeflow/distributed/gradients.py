"""ZeRO stage 2's gradients: reduce-scattered bucket by bucket while backward runs.

Each parameter group's flat buffer (optim.py) is cut into buckets of about `bucket_cap_mb`,
contiguous ranges of it in the order backward produces gradients (last parameters first).
When a bucket's last gradient is accumulated, its gradients are copied into one send
buffer and freed, and a non-blocking reduce-scatter gives each rank the sum over ranks of
the part of the bucket its slice covers. One bucket is in flight at a time: the next launch
waits for it and frees its send buffer, so at most one bucket of full-size gradients (plus
the gradients backward is still making) exists at once.
"""

from __future__ import annotations

import numpy as np

from ..tensor import from_numpy
from .group import wait, world


def bucket_ranges(sizes: list[int], padded: int, cap_elements: float) -> list[tuple]:
    """(lo, hi, parameter indices) of each bucket of a flat buffer, in reverse parameter
    order; the first bucket also covers the padding at the end (up to `padded`)."""
    offsets = np.cumsum([0] + list(sizes)).tolist()
    buckets, current, count, hi = [], [], 0, padded
    for i in reversed(range(len(sizes))):
        if current and count + sizes[i] > cap_elements:
            buckets.append((offsets[current[-1]], hi, current))
            hi, current, count = offsets[current[-1]], [], 0
        current.append(i)
        count += sizes[i]
    if current:
        buckets.append((0, hi, current))
    return buckets


def _wide(dtype) -> bool:
    """MPI has no 16-bit floats: those gradients are summed as float32."""
    return dtype.itemsize == 2 and dtype.kind in "fV"  # float16, bfloat16 (ml_dtypes: V)


class _Bucket:
    __slots__ = ("shard", "lo", "hi", "params", "index", "expected", "ready", "sent",
                 "reduced")

    def __init__(self, shard, lo: int, hi: int, index: list) -> None:
        self.shard, self.lo, self.hi, self.index = shard, lo, hi, index
        self.params = [shard.params[i] for i in index]
        self.expected = sum(p.requires_grad for p in self.params)
        self.ready = 0
        self.sent = False  # in this backward
        self.reduced = False  # since zero_grad: a second backward adds to the slice


class ShardedGradients:
    """Post-accumulate hooks that reduce-scatter each full bucket into the ranks' slices."""

    def __init__(self, shards: list, comm, bucket_cap_mb: float) -> None:
        self.comm, self.n, self.rank = comm, comm.Get_size(), comm.Get_rank()
        self.buckets: list[_Bucket] = []
        self.bucket_of: dict[int, _Bucket] = {}
        for shard in shards:
            cap = bucket_cap_mb * 2**20 / shard.flat.dtype.itemsize
            for lo, hi, index in bucket_ranges(shard.sizes, len(shard.flat), cap):
                b = _Bucket(shard, lo, hi, index)
                self.buckets.append(b)
                self.bucket_of.update((id(p), b) for p in b.params)
        self.inflight = None
        self.launched = 0
        for shard in shards:
            for p in shard.params:
                if p.requires_grad:
                    p.register_post_accumulate_grad_hook(self._ready)

    def zero(self) -> None:
        """After zero_grad: the next backward writes every slice afresh."""
        self._wait()
        for b in self.buckets:
            b.reduced = False

    def _ready(self, param) -> None:
        b = self.bucket_of[id(param)]
        b.ready += 1
        if b.ready == b.expected:
            self._launch(b)

    def finish(self) -> None:
        """Before the step: buckets whose gradients never all came (unused parameters) are
        reduced now with zeros for the missing ones, and the last one is waited for."""
        if self.launched or any(b.ready for b in self.buckets):
            for b in self.buckets:
                if not b.sent:
                    self._launch(b)
        self._wait()

    def _launch(self, b: _Bucket) -> None:
        self._wait()  # the bucket in flight first: its send buffer is freed before ours
        shard = b.shard
        if shard.param.grad is None:
            shard.param.grad = from_numpy(np.zeros(shard.per_rank, shard.flat.dtype))
        wide = _wide(shard.flat.dtype)
        send = np.empty(b.hi - b.lo, np.float32 if wide else shard.flat.dtype)
        for i, p in zip(b.index, b.params):
            lo, hi = shard.offsets[i] - b.lo, shard.offsets[i + 1] - b.lo
            if p.grad is not None:
                send[lo:hi] = p.grad._data.reshape(-1)
            else:  # unused in this backward, or frozen
                send[lo:hi] = 0
            p.grad = None  # the full gradient is not kept: that is stage 2
        send[shard.offsets[-1] - b.lo:] = 0  # the padding of the last slice
        per, n = shard.per_rank, self.n
        counts = [max(0, min(b.hi, (r + 1) * per) - max(b.lo, r * per)) for r in range(n)]
        start = max(b.lo, self.rank * per) - self.rank * per
        region = shard.param.grad._data[start:start + counts[self.rank]]
        direct = not wide and not b.reduced
        recv = region if direct else np.empty(counts[self.rank], send.dtype)
        request = self.comm.Ireduce_scatter(send, recv, counts, world.MPI.SUM)
        b.reduced = b.sent = True
        self.inflight = (request, send, recv, region, direct)
        self.launched += 1
        if self.launched == len(self.buckets):  # backward is over: the next one starts anew
            self._wait()
            for every in self.buckets:
                every.ready, every.sent = 0, False
            self.launched = 0

    def _wait(self) -> None:
        if self.inflight is None:
            return
        request, send, recv, region, direct = self.inflight
        self.inflight = None
        wait(request, "ZeroRedundancyOptimizer: the gradients' reduce_scatter (stage 2)")
        del send  # freed here, before the next bucket's buffer exists
        if direct:
            region /= self.n
        else:
            recv /= self.n
            region += recv.astype(region.dtype, copy=False)
