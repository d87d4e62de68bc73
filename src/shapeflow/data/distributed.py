"""DistributedSampler: each rank reads its own 1/N of the dataset (as torch's)."""

from __future__ import annotations

import numpy as np

from .dataloader import Sampler


class DistributedSampler(Sampler):
    """Rank `rank`'s share of the indices: every num_replicas-th of one (shuffled) order.

    Without drop_last the order is padded with its own first indices so that every rank gets
    the same count; `set_epoch(e)` reshuffles (the order is a function of seed and epoch only,
    so all ranks agree without talking).
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        from ..distributed import group
        from ..distributed.launch import launched_by_mpiexec

        if (num_replicas is None or rank is None) and not group.is_initialized() \
                and launched_by_mpiexec():
            # the world of one an uninitialized group reports would give every rank it all
            raise group.DistributedError(
                "DistributedSampler: this process is one of several ranks (mpiexec started "
                "it) but the process group is not initialized yet, so every rank would read "
                "the whole dataset", hint="call sf.distributed.init_process_group() before "
                "building the sampler, or pass num_replicas and rank")
        self.num_replicas = group.get_world_size() if num_replicas is None else num_replicas
        self.rank = group.get_rank() if rank is None else rank
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"Invalid rank {self.rank}, rank should be in the interval "
                             f"[0, {self.num_replicas - 1}]")
        self.dataset, self.shuffle, self.seed, self.drop_last = dataset, shuffle, seed, drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % self.num_replicas:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Make the next iter() give epoch `epoch`'s order."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_samples

    def _index_chunks(self):
        n = len(self.dataset)
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(n)
        else:
            order = np.arange(n, dtype=np.int64)
        if self.total_size > n:  # pad with the order's own start (repeated if needed)
            order = np.resize(order, self.total_size)
        yield order[:self.total_size][self.rank::self.num_replicas]

    def __iter__(self):
        for chunk in self._index_chunks():
            yield from chunk.tolist()
