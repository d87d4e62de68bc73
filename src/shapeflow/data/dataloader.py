"""DataLoader: batches of a dataset in sampler order, collated into tensors; and its samplers.

Shuffling is deterministic: `seed=s` gives epoch e the order of a NumPy generator
seeded with (s, e), so the same seed gives the same orders in every run and each
epoch a new one; `generator=g` draws from g (as PyTorch does); with neither, the
default generator is used (`sf.manual_seed` fixes it).
"""

from __future__ import annotations

import collections.abc as abc
import copy
import itertools

import numpy as np

from ..device import cpu
from ..dtypes import float64
from ..errors import DTypeError, ShapeError, ShapeRuntimeError
from ..random import Generator, get_rng
from ..tensor import Tensor, as_tensor, describe, tensor
from .dataset import batch_fetcher

# Indices are made and batched this many at a time: an epoch of any length (a RandomSampler
# with num_samples=10**10) holds one chunk, never the whole epoch.
CHUNK = 1 << 16


class Sampler:
    """Yields the indices (keys) of a dataset, one epoch per `iter()`."""

    def __init__(self, data_source=None) -> None:
        pass

    def __iter__(self):
        raise NotImplementedError

    def _index_chunks(self):
        """The epoch's indices as int64 arrays of at most CHUNK (overridden where faster)."""
        return _blocks(iter(self))


def _blocks(keys):
    """int64 arrays of up to CHUNK integer keys taken from an iterator."""
    while True:
        block = np.fromiter(itertools.islice(keys, CHUNK), dtype=np.int64)
        if not len(block):
            return
        yield block


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)

    def _index_chunks(self):
        n = len(self.data_source)
        for start in range(0, n, CHUNK):
            yield np.arange(start, min(start + CHUNK, n), dtype=np.int64)


class RandomSampler(Sampler):
    """A new random order each epoch (or `num_samples` draws with replacement).

    Draws are made as the epoch is read, CHUNK at a time (as PyTorch draws them, lazily), so
    memory does not grow with `num_samples`; the values are those of one draw of the whole
    epoch from the same generator.
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None, seed: int | None = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        self.seed = seed
        self.epoch = 0
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise ShapeError(f"num_samples must be a positive int, got {num_samples!r}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next `iter()` give epoch `epoch`'s order (with a seed)."""
        self.epoch = int(epoch)

    def _rng(self) -> np.random.Generator:
        if self.seed is not None:
            rng = np.random.default_rng([int(self.seed), self.epoch])
            self.epoch += 1
            return rng
        self.epoch += 1
        return get_rng(self.generator)

    def _index_chunks(self):
        n, k, rng = len(self.data_source), self.num_samples, self._rng()
        if self.replacement:
            for start in range(0, k, CHUNK):
                yield rng.integers(0, n, size=min(CHUNK, k - start), dtype=np.int64)
            return
        if k == n:
            yield rng.permutation(n)
            return
        # more (or fewer) samples than the dataset holds: whole permutations, then part of one
        for _ in range(k // n):
            yield rng.permutation(n)
        if k % n:
            yield rng.permutation(n)[: k % n]

    def __iter__(self):
        for chunk in self._index_chunks():
            yield from chunk.tolist()


class SubsetRandomSampler(Sampler):
    """The given indices in a new random order each epoch."""

    def __init__(self, indices, generator: Generator | None = None) -> None:
        self.indices = np.asarray(list(indices), dtype=np.int64)
        self.generator = generator

    def __len__(self) -> int:
        return len(self.indices)

    def _index_chunks(self):
        yield self.indices[get_rng(self.generator).permutation(len(self.indices))]

    def __iter__(self):
        for chunk in self._index_chunks():
            yield from chunk.tolist()


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of `batch_size` (the last shorter, or dropped)."""

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ShapeError(f"batch_size must be a positive int, got {batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _chunks(self, as_array: bool):
        """The epoch's batches, as int64 arrays (as_array) or lists of the sampler's keys,
        made from the sampler's indices as they come (never the whole epoch at once)."""
        bs, sampler = self.batch_size, self.sampler
        if not (as_array or isinstance(sampler, (SequentialSampler, RandomSampler,
                                                 SubsetRandomSampler))):
            yield from self._key_batches()  # keys of any kind, as lists
            return
        chunks = sampler._index_chunks() if hasattr(sampler, "_index_chunks") else (
            _blocks(iter(sampler)))
        pending = np.empty(0, dtype=np.int64)
        for chunk in chunks:
            if len(pending):
                chunk = np.concatenate([pending, chunk])
            full = len(chunk) - len(chunk) % bs
            for start in range(0, full, bs):
                batch = chunk[start:start + bs]
                yield batch if as_array else batch.tolist()
            pending = chunk[full:]
        if len(pending) and not self.drop_last:
            yield pending if as_array else pending.tolist()

    def _key_batches(self):
        batch = []
        for key in self.sampler:
            batch.append(key)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __iter__(self):
        return self._chunks(as_array=False)


class DataLoader:
    """Iterates a dataset in batches (as `torch.utils.data.DataLoader`, in this process).

    `for x, y in DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True, seed=0)`.
    A TensorDataset (or a Subset of one) is batched by fancy-indexing its arrays once
    per batch. `num_workers` and `pin_memory` are accepted for PyTorch code and ignored:
    loading runs in the calling process.
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool = False, sampler=None,
                 *, batch_sampler=None, drop_last: bool = False, collate_fn=None,
                 generator: Generator | None = None, seed: int | None = None,
                 num_workers: int = 0, pin_memory: bool = False) -> None:
        if seed is not None and generator is not None:
            raise ShapeError("DataLoader: pass a seed or a generator, not both")
        if sampler is not None and shuffle:
            raise ShapeError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ShapeError(
                    "DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler and drop_last"
                )
            batch_size = None
        elif batch_size is None and drop_last:
            raise ShapeError("DataLoader: batch_size=None option disables auto-batching and is "
                             "mutually exclusive with drop_last")
        self._stream = getattr(dataset, "_stream", False)  # an IterableDataset: no indices
        if self._stream:
            _check_stream_options(shuffle, sampler, batch_sampler)
        elif sampler is None:
            sampler = (RandomSampler(dataset, generator=generator, seed=seed) if shuffle
                       else SequentialSampler(dataset))
        if batch_sampler is None and batch_size is not None and not self._stream:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.collate_fn = collate_fn
        self.generator = generator
        self.seed = seed
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ShapeError("DataLoader: num_workers option should be non-negative; use "
                             f"num_workers=0 to disable multiprocessing, got {num_workers!r}",
                             op="DataLoader")
        self.num_workers = num_workers
        self.pin_memory = pin_memory

    def __len__(self) -> int:
        if self._stream:  # as PyTorch: the stream's len, in batches (TypeError if it has none)
            n, bs = len(self.dataset), self.batch_size
            return n if bs is None else (n // bs if self.drop_last else -(-n // bs))
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        """Make the next epoch epoch number `epoch` (its order, with a seed)."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        dataset, collate = self.dataset, self.collate_fn
        if self._stream:
            yield from _stream_batches(iter(dataset), self.batch_size, self.drop_last, collate)
            return
        if self.batch_sampler is None:  # batch_size=None: samples one by one
            for i in self.sampler:
                yield dataset[i] if collate is None else collate(dataset[i])
            return
        fetch = batch_fetcher(dataset) if collate is None else None
        if isinstance(self.batch_sampler, BatchSampler):
            batches = self.batch_sampler._chunks(as_array=fetch is not None)
        else:
            batches = iter(self.batch_sampler)
        if fetch is not None:
            for idx in batches:
                yield fetch(np.asarray(idx, dtype=np.int64))
            return
        collate = collate or default_collate
        for idx in batches:
            yield collate([dataset[i] for i in idx])

    def __repr__(self) -> str:
        if self._stream:
            return f"DataLoader({type(self.dataset).__name__}, batch_size={self.batch_size})"
        return (f"DataLoader({type(self.dataset).__name__} of {len(self.dataset)}, "
                f"batch_size={self.batch_size}, batches={len(self)})")


def _check_stream_options(shuffle, sampler, batch_sampler) -> None:
    for name, value in (("shuffle", shuffle), ("sampler", sampler),
                        ("batch_sampler", batch_sampler)):
        if value:
            raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} "
                             f"option, but got {name}={value!r}")


def _stream_batches(samples, batch_size, drop_last: bool, collate):
    """Batches of an iterable dataset: batch_size samples at a time, collated."""
    if batch_size is None:
        for sample in samples:
            yield sample if collate is None else collate(sample)
        return
    collate = collate or default_collate
    while True:
        batch = list(itertools.islice(samples, batch_size))
        if not batch or (drop_last and len(batch) < batch_size):
            return
        yield collate(batch)


class CollateKeyError(ShapeError, KeyError):
    """A sample lacks a key that the batch's first sample has (KeyError, as in PyTorch)."""


def _stack(batch: list) -> Tensor:
    """Tensors stacked into a new first dim, promoting dtypes (torch.stack, graph kept)."""
    from ..ops.movement import stack

    first = batch[0].shape
    for i, t in enumerate(batch):
        if isinstance(t, Tensor) and t.shape != first:
            raise ShapeRuntimeError(
                f"default_collate: samples of different shapes cannot be stacked into a batch: "
                f"{list(first)} and {list(t.shape)} (samples 0 and {i})",
                op="default_collate",
                operands=[("sample 0", describe(batch[0])), (f"sample {i}", describe(t))],
                hint="pad the samples to one shape, or pass a collate_fn",
            )
    if all(type(t) is Tensor and t.device is cpu and t.dtype is batch[0].dtype
           and not t.requires_grad for t in batch):
        # the common case, plain data: one np.stack, ~6x quicker than the op's unsqueeze + cat
        arr = np.stack([t._data for t in batch])
        return Tensor._make(arr, arr.shape, batch[0].dtype, cpu)
    return stack(batch)  # promotes dtypes, records the graph, raises for a non-tensor


def _clone_with(elem, items):
    """`elem`'s container type holding `items` (pairs for a mapping), as PyTorch rebuilds it:
    a mutable one copied and filled, another built from them, a plain one if that fails."""
    mapping = isinstance(elem, abc.Mapping)
    try:
        if isinstance(elem, abc.MutableMapping if mapping else abc.MutableSequence):
            clone = copy.copy(elem)
            for key, value in items:
                clone[key] = value
            return clone
        return type(elem)(dict(items) if mapping else [v for _, v in items])
    except TypeError:
        return dict(items) if mapping else [v for _, v in items]


def default_collate(batch):
    """Stack a list of samples into a batch, by PyTorch's `default_collate` rules.

    Tensors stack (dtypes promoted); NumPy arrays become tensors and stack; NumPy scalars and
    Python ints become `tensor(batch)` (its dtype inference), Python floats a float64 tensor;
    strings and bytes stay as given; mappings, namedtuples and sequences collate per key or
    position, keeping their type (a tuple gives a list).
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack(batch)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "SaUO":
            raise DTypeError(f"default_collate: cannot batch NumPy arrays of dtype {elem.dtype}",
                             op="default_collate", hint="pass a collate_fn for such samples")
        return _stack([as_tensor(a) for a in batch])
    if isinstance(elem, (np.bool_, np.number, np.object_)):  # before float: np.float64 is one
        return tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype=float64)
    if isinstance(elem, int):  # bools too: tensor() infers bool, int64 or float32
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        return _clone_with(elem, [(key, default_collate(_column(batch, key))) for key in elem])
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise ShapeRuntimeError(
                "default_collate: each element in list of batch should be of equal size, got "
                f"sizes {[len(e) for e in batch]}", op="default_collate",
                hint="pad the samples to one length, or pass a collate_fn")
        columns = [default_collate(s) for s in zip(*batch)]  # each column a tuple, as PyTorch's
        if isinstance(elem, tuple):
            return columns
        return _clone_with(elem, list(enumerate(columns)))
    raise DTypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        f"found {type(elem)}", op="default_collate", hint="pass a collate_fn for such samples")


def _column(batch: list, key) -> list:
    """Each sample's value at `key`: the batch's column for one key of its mappings."""
    out = []
    for i, d in enumerate(batch):
        if not isinstance(d, abc.Mapping):
            raise DTypeError(f"default_collate: sample {i} is a {type(d).__name__} in a batch "
                             "of mappings", op="default_collate")
        if key not in d:
            raise CollateKeyError(f"default_collate: sample {i} has no key {key!r}, which "
                                  "sample 0 has", op="default_collate",
                                  hint="give every sample the same keys, or pass a collate_fn")
        out.append(d[key])
    return out
