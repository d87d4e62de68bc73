"""Datasets: the map-style `Dataset`, `TensorDataset`, `Subset`, `ConcatDataset`, `random_split`.

A dataset may also define `_batch(indices)`: the collated batch for an integer
array of indices, in one vectorised step. The DataLoader uses it (when no
`collate_fn` is given) instead of fetching and collating samples one by one.
"""

from __future__ import annotations

import bisect
import math
import warnings
from abc import ABC, abstractmethod

import numpy as np

from ..device import cpu
from ..dtypes import from_numpy_dtype
from ..errors import ShapeError
from ..random import Generator, get_rng
from ..tensor import Tensor, as_tensor, describe


class Dataset(ABC):
    """A map-style dataset: `len(ds)` samples, `ds[i]` the i-th (as `torch.utils.data.Dataset`)."""

    @abstractmethod
    def __getitem__(self, index):
        ...

    @abstractmethod
    def __len__(self) -> int:
        ...

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


def _wrap(arr: np.ndarray) -> Tensor:
    return Tensor._make(arr, arr.shape, from_numpy_dtype(arr.dtype), cpu)


def batch_fetcher(dataset):
    """`indices -> batch` for a dataset that can fetch a whole batch at once, else None.

    A Subset (of a Subset...) of such a dataset maps its indices and asks its parent.
    """
    if isinstance(dataset, Subset):
        parent = batch_fetcher(dataset.dataset)
        if parent is None:
            return None
        index_array = dataset._index_array
        return lambda indices: parent(index_array[indices])
    return getattr(dataset, "_batch", None)


class TensorDataset(Dataset):
    """Samples are rows of tensors that share their first dimension: `ds[i] = (a[i], b[i], ...)`."""

    def __init__(self, *tensors) -> None:
        if not tensors:
            raise ShapeError("TensorDataset needs at least one tensor")
        tensors = tuple(as_tensor(t) for t in tensors)
        for t in tensors:
            t._need_data("TensorDataset")
        sizes = [t.shape[0] if t.ndim else None for t in tensors]
        if None in sizes or len(set(sizes)) != 1:
            raise ShapeError(
                "TensorDataset: every tensor needs the same first dimension (the number of "
                f"samples), got {', '.join('none (0-d)' if s is None else str(s) for s in sizes)}",
                op="TensorDataset",
                operands=[(f"tensors[{i}]", describe(t)) for i, t in enumerate(tensors)],
                hint="each tensor holds one row per sample: x [N, ...], y [N, ...]",
            )
        self.tensors = tensors
        # the arrays, detached: samples and batches are data, not part of a graph
        self._arrays = tuple(t._data for t in tensors)

    def __getitem__(self, index):
        return tuple(_wrap(np.asarray(a[index])) for a in self._arrays)

    def __len__(self) -> int:
        return self._arrays[0].shape[0]

    def _batch(self, indices: np.ndarray) -> list:
        # one fancy-index per tensor: the whole batch without a per-sample Python loop
        return [_wrap(a[indices]) for a in self._arrays]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset: Dataset, indices) -> None:
        self.dataset = dataset
        self.indices = [int(i) for i in indices]
        self._index_array = np.asarray(self.indices, dtype=np.int64)

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after another (what `a + b` gives)."""

    def __init__(self, datasets) -> None:
        self.datasets = []
        for d in datasets:
            # flatten `a + b + c` into one level
            self.datasets.extend(d.datasets if isinstance(d, ConcatDataset) else [d])
        if not self.datasets:
            raise ShapeError("ConcatDataset needs at least one dataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        n = len(self)
        if index < 0:
            if -index > n:
                raise IndexError(f"index {index} out of range for a dataset of {n} samples")
            index += n
        if index >= n:
            raise IndexError(f"index {index} out of range for a dataset of {n} samples")
        k = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][index - start]


def _split_lengths(n: int, lengths) -> list[int]:
    """PyTorch's rule: fractions summing to 1 become floor(n * f), the rest dealt round-robin."""
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        if any(f < 0 or f > 1 for f in lengths):
            raise ShapeError(f"random_split: fractions must lie in [0, 1], got {lengths}")
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, s in enumerate(sizes):
            if s == 0:
                warnings.warn(f"random_split: length of split at index {i} is 0", stacklevel=3)
        return sizes
    if any(isinstance(s, float) and not float(s).is_integer() for s in lengths):
        raise ShapeError(
            f"random_split: lengths must be ints summing to {n} or fractions summing to 1, "
            f"got {lengths}"
        )
    sizes = [int(s) for s in lengths]
    if any(s < 0 for s in sizes):
        raise ShapeError(f"random_split: lengths must be non-negative, got {sizes}")
    if sum(sizes) != n:
        raise ShapeError(
            f"random_split: the lengths sum to {sum(sizes)} but the dataset has {n} samples"
        )
    return sizes


def random_split(dataset: Dataset, lengths, generator: Generator | None = None) -> list[Subset]:
    """Disjoint random Subsets of the given lengths (ints, or fractions that sum to 1)."""
    sizes = _split_lengths(len(dataset), lengths)
    perm = get_rng(generator).permutation(len(dataset))
    out, start = [], 0
    for s in sizes:
        out.append(Subset(dataset, perm[start:start + s].tolist()))
        start += s
    return out
