"""Stream datasets (`IterableDataset`, `ChainDataset`), `WeightedRandomSampler` and
`get_worker_info`, as in `torch.utils.data`."""

from __future__ import annotations

import itertools

import numpy as np

from ..random import Generator, get_rng
from .dataloader import Sampler
from .dataset import Dataset


class IterableDataset:
    """A dataset read as a stream: subclasses define `__iter__` (no indexing, no sampler)."""

    _stream = True  # what DataLoader looks for (it cannot import this module: a circle)

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: IterableDataset) -> ChainDataset:
        return ChainDataset([self, other])


Dataset.register(IterableDataset)  # isinstance(stream, Dataset) holds, as in PyTorch


class ChainDataset(IterableDataset):
    """Several iterable datasets read one after the other."""

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)

    def __iter__(self):
        return itertools.chain.from_iterable(self.datasets)

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to weights."""

    def __init__(self, weights, num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or \
                num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, np.float64)
        if w.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights, self.num_samples = w, num_samples
        self.replacement, self.generator = replacement, generator

    def __len__(self) -> int:
        return self.num_samples

    def _index_chunks(self):
        from ..device import cpu
        from ..ops.sampling import Multinomial

        op = Multinomial(self.num_samples, self.replacement, get_rng(self.generator))
        op.device = cpu  # host weights; what apply would set
        yield op.forward(self.weights)  # checks the weights as sf.multinomial does

    def __iter__(self):
        for chunk in self._index_chunks():
            yield from chunk.tolist()


def get_worker_info():
    """None: loading runs in the calling process (PyTorch's answer in the main process)."""
    return None
