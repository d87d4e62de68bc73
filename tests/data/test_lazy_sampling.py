"""Samplers and the DataLoader draw lazily: memory and start-up time do not grow with the
epoch's length (PyTorch's RandomSampler(replacement=True, num_samples=10**10) works)."""

from __future__ import annotations

import itertools
import time
import tracemalloc

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.data import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    Sampler,
    SequentialSampler,
    TensorDataset,
)
from shapeflow.data.dataloader import CHUNK

HUGE = 10**10  # 80 GB of int64 indices if made up front


def _dataset(n=100):
    x = np.arange(n, dtype=np.float32).reshape(n, 1)
    return TensorDataset(sf.tensor(x), sf.tensor(np.arange(n)))


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("replacement", [True, False])
def test_huge_num_samples_is_lazy_and_constant_memory(replacement):
    ds = _dataset()
    sampler = RandomSampler(ds, replacement=replacement, num_samples=HUGE)
    loader = DataLoader(ds, batch_size=32, sampler=sampler)
    assert len(sampler) == HUGE and len(loader) == -(-HUGE // 32)

    def first_batches():
        for x, y in itertools.islice(loader, 3 * CHUNK // 32):  # three chunks' worth
            assert x.shape == (32, 1) and int(y.min()) >= 0 and int(y.max()) < 100
        assert all(0 <= i < 100 for i in itertools.islice(iter(sampler), 1000))

    start = time.perf_counter()
    peak = _peak_bytes(first_batches)
    assert peak < 16 * CHUNK * 8, peak  # a few chunks, not 10**10 indices
    assert time.perf_counter() - start < 30


def test_lazy_draws_are_those_of_one_draw_from_the_same_generator():
    n, k, seed = 1000, 3 * CHUNK + 17, 5
    sf.manual_seed(seed)
    got = np.array(list(RandomSampler(range(n), replacement=True, num_samples=k)))
    want = np.random.default_rng(seed).integers(0, n, size=k, dtype=np.int64)
    np.testing.assert_array_equal(got, want)
    # and reproducible from sf.manual_seed, through the DataLoader's batches too
    ds = _dataset(n)
    runs = []
    for _ in range(2):
        sf.manual_seed(seed)
        sampler = RandomSampler(ds, replacement=True, num_samples=k)
        runs.append(np.concatenate([y.numpy() for _, y in DataLoader(ds, batch_size=100,
                                                                       sampler=sampler)]))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], want)
    g = sf.Generator().manual_seed(9)
    first = list(RandomSampler(range(n), replacement=True, num_samples=50, generator=g))
    assert first == np.random.default_rng(9).integers(0, n, size=50).tolist()


def test_without_replacement_each_pass_is_a_permutation():
    n = 10
    sampler = RandomSampler(range(n), num_samples=25, seed=3)
    got = list(sampler)
    assert len(got) == 25
    assert sorted(got[:10]) == sorted(got[10:20]) == list(range(n))
    assert len(set(got[20:])) == 5
    assert list(RandomSampler(range(0))) == []


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1000, CHUNK, 7])
def test_batches_span_chunk_boundaries(batch_size, drop_last):
    n = 2 * CHUNK + 5
    batches = list(BatchSampler(SequentialSampler(range(n)), batch_size, drop_last))
    full, rest = divmod(n, batch_size)
    assert len(batches) == len(BatchSampler(SequentialSampler(range(n)), batch_size,
                                            drop_last))
    assert [len(b) for b in batches] == [batch_size] * full + ([rest] if rest and not
                                                               drop_last else [])
    flat = list(itertools.chain.from_iterable(batches))
    assert flat == list(range(full * batch_size if drop_last else n))
    assert all(type(i) is int for i in batches[0])


def test_custom_samplers_are_read_lazily():
    class Endless(Sampler):
        def __iter__(self):
            return itertools.count()

        def __len__(self):
            return HUGE

    ds = _dataset()

    class Wrap(Sampler):  # indices modulo the dataset, from an endless iterator
        def __iter__(self):
            return (i % 100 for i in Endless())

        def __len__(self):
            return HUGE

    x, y = next(iter(DataLoader(ds, batch_size=4, sampler=Wrap())))
    assert y.tolist() == [0, 1, 2, 3]
    keys = list(itertools.islice(BatchSampler(Endless(), 3, drop_last=False), 2))
    assert keys == [[0, 1, 2], [3, 4, 5]]
    one_by_one = DataLoader(ds, batch_size=None, sampler=RandomSampler(
        ds, replacement=True, num_samples=HUGE))
    x, y = next(iter(one_by_one))
    assert x.shape == (1,) and 0 <= int(y) < 100
