"""Datasets, DataLoader, random_split, default_collate and the bundled datasets."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)
from shapeflow.data import datasets as D
from shapeflow.errors import ShapeError


class Squares(Dataset):
    """A plain (slow-path) dataset: sample i is (i, i*i)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i, float(i * i)


def _ids(n=23):
    x = sf.from_numpy(np.arange(n, dtype=np.float32).reshape(n, 1) * np.ones((1, 3), np.float32))
    y = sf.from_numpy(np.arange(n, dtype=np.int64))
    return TensorDataset(x, y)


def _epoch(loader):
    """The sample ids of one epoch, in order."""
    out = []
    for batch in loader:
        y = batch[1]
        out.extend(np.asarray(y).tolist() if isinstance(y, sf.Tensor) else y)
    return out


# ---- Dataset, TensorDataset, Subset, ConcatDataset -------------------------------------------

def test_dataset_is_abstract():
    class NoLen(Dataset):
        def __getitem__(self, i):
            return i

    with pytest.raises(TypeError):
        NoLen()


def test_tensor_dataset_samples():
    ds = _ids(5)
    assert len(ds) == 5
    x, y = ds[3]
    assert x.shape == (3,) and x.dtype is sf.float32 and np.asarray(x).tolist() == [3.0] * 3
    assert y.shape == () and y.dtype is sf.int64 and y.item() == 3
    assert ds[-1][1].item() == 4


def test_tensor_dataset_size_mismatch_names_each_shape():
    with pytest.raises(ShapeError) as info:
        TensorDataset(sf.zeros(10, 3), sf.zeros(9), sf.zeros(10, 2, 2))
    msg = str(info.value)
    assert "10, 9, 10" in msg
    assert "[10, 3] float32 cpu" in msg and "[9] float32 cpu" in msg
    assert "[10, 2, 2] float32 cpu" in msg
    assert isinstance(info.value, ValueError)


def test_tensor_dataset_rejects_0d_and_empty():
    with pytest.raises(ShapeError):
        TensorDataset(sf.zeros(3), sf.tensor(1.0))
    with pytest.raises(ShapeError):
        TensorDataset()


def test_subset_and_concat():
    ds = _ids(10)
    sub = Subset(ds, [7, 2, 5])
    assert len(sub) == 3 and [sub[i][1].item() for i in range(3)] == [7, 2, 5]
    both = ds + Squares(4)
    assert isinstance(both, ConcatDataset) and len(both) == 14
    assert both[9][1].item() == 9 and both[10] == (0, 0.0) and both[-1] == (3, 9.0)
    assert len(both + ds) == 24 and len((both + ds).datasets) == 3
    with pytest.raises(IndexError):
        both[14]


# ---- DataLoader ------------------------------------------------------------------------------

@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4, 7, 23, 50])
def test_every_sample_once_per_epoch(shuffle, batch_size):
    loader = DataLoader(_ids(23), batch_size=batch_size, shuffle=shuffle, seed=3)
    for _ in range(3):
        ids = _epoch(loader)
        assert sorted(ids) == list(range(23))
        if not shuffle:
            assert ids == list(range(23))


@pytest.mark.parametrize("shuffle", [False, True])
def test_every_sample_once_slow_path(shuffle):
    loader = DataLoader(Squares(19), batch_size=4, shuffle=shuffle, seed=1)
    ids = []
    for i, sq in loader:
        assert i.dtype is sf.int64 and sq.dtype is sf.float64
        assert np.array_equal(np.asarray(sq), np.asarray(i).astype(np.float64) ** 2)
        ids += np.asarray(i).tolist()
    assert sorted(ids) == list(range(19))


def test_same_seed_same_order_and_epochs_differ():
    a = DataLoader(_ids(40), batch_size=8, shuffle=True, seed=123)
    b = DataLoader(_ids(40), batch_size=8, shuffle=True, seed=123)
    epochs_a = [_epoch(a) for _ in range(3)]
    epochs_b = [_epoch(b) for _ in range(3)]
    assert epochs_a == epochs_b
    assert epochs_a[0] != epochs_a[1] != epochs_a[2]
    assert epochs_a[0] != list(range(40))
    c = DataLoader(_ids(40), batch_size=8, shuffle=True, seed=124)
    assert _epoch(c) != epochs_a[0]
    a.set_epoch(1)  # replay an epoch (resuming a run)
    assert _epoch(a) == epochs_a[1]


def test_generator_determinism():
    def run(seed):
        g = sf.Generator().manual_seed(seed)
        loader = DataLoader(_ids(30), batch_size=4, shuffle=True, generator=g)
        return [_epoch(loader) for _ in range(2)]

    first, again = run(5), run(5)
    assert first == again and first[0] != first[1]
    assert run(6) != first


def test_default_generator_follows_manual_seed():
    sf.manual_seed(11)
    one = _epoch(DataLoader(_ids(30), batch_size=4, shuffle=True))
    sf.manual_seed(11)
    two = _epoch(DataLoader(_ids(30), batch_size=4, shuffle=True))
    assert one == two and sorted(one) == list(range(30))


def test_fast_path_equals_slow_path():
    ds = _ids(37)
    fast = DataLoader(ds, batch_size=6, shuffle=True, seed=9)
    slow = DataLoader(ds, batch_size=6, shuffle=True, seed=9, collate_fn=default_collate)
    for (fx, fy), (sx, sy) in zip(fast, slow, strict=True):
        assert fx.shape == sx.shape and fx.dtype is sx.dtype
        assert np.array_equal(np.asarray(fx), np.asarray(sx))
        assert np.array_equal(np.asarray(fy), np.asarray(sy))


def test_tensor_dataset_batches_without_per_sample_calls(monkeypatch):
    def boom(self, i):
        raise AssertionError("per-sample __getitem__ on the TensorDataset fast path")

    monkeypatch.setattr(TensorDataset, "__getitem__", boom)
    ds = _ids(50)
    for loader in (DataLoader(ds, batch_size=16, shuffle=True, seed=0),
                   DataLoader(random_split(ds, [30, 20], generator=sf.Generator())[0],
                              batch_size=8, shuffle=True, seed=0)):
        n = 0
        for x, y in loader:
            assert x.shape[1:] == (3,) and x.shape[0] == y.shape[0]
            n += y.shape[0]
        assert n == len(loader.dataset)


def test_subset_fast_path_maps_indices():
    ds = _ids(20)
    sub = Subset(ds, [19, 3, 7, 11])
    (x, y), = list(DataLoader(sub, batch_size=4))
    assert np.asarray(y).tolist() == [19, 3, 7, 11]
    assert np.asarray(x)[:, 0].tolist() == [19.0, 3.0, 7.0, 11.0]


@pytest.mark.parametrize("n,bs", [(23, 5), (20, 5), (3, 5), (0, 4)])
def test_drop_last_and_len(n, bs):
    ds = _ids(n) if n else Squares(0)
    keep = DataLoader(ds, batch_size=bs)
    drop = DataLoader(ds, batch_size=bs, drop_last=True)
    assert len(keep) == -(-n // bs) == len(list(keep))
    assert len(drop) == n // bs == len(list(drop))
    sizes = [len(b[1]) for b in drop]
    assert all(s == bs for s in sizes) and sum(sizes) == n - n % bs


def test_loader_batch_shapes():
    x, y = next(iter(DataLoader(_ids(10), batch_size=4)))
    assert x.shape == (4, 3) and y.shape == (4,) and y.dtype is sf.int64


def test_sampler_options():
    ds = _ids(10)
    with pytest.raises(ValueError):
        DataLoader(ds, shuffle=True, sampler=SequentialSampler(ds))
    loader = DataLoader(ds, batch_size=3, sampler=[9, 0, 4, 4])  # any iterable of indices
    assert _epoch(loader) == [9, 0, 4, 4] and len(loader) == 2
    bs = DataLoader(ds, batch_sampler=[[1, 2], [5]])
    assert _epoch(bs) == [1, 2, 5] and len(bs) == 2
    with pytest.raises(ValueError):
        DataLoader(ds, batch_size=4, batch_sampler=[[1]])
    one = list(DataLoader(Squares(3), batch_size=None))
    assert one == [(0, 0.0), (1, 1.0), (2, 4.0)]
    assert list(BatchSampler(range(5), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError):
        BatchSampler(range(5), 0, drop_last=False)


# ---- default_collate -------------------------------------------------------------------------

def test_collate_tuples_and_numbers():
    out = default_collate([(1, 2.5, True, "a"), (3, 4.5, False, "b")])
    assert isinstance(out, list) and len(out) == 4  # a tuple collates to a list, as in PyTorch
    ints, floats, bools, strs = out
    assert ints.dtype is sf.int64 and np.asarray(ints).tolist() == [1, 3]
    assert floats.dtype is sf.float64 and np.asarray(floats).tolist() == [2.5, 4.5]
    assert bools.dtype is sf.bool and np.asarray(bools).tolist() == [True, False]
    assert strs == ("a", "b")  # a column of strings stays the tuple zip gives, as in PyTorch


def test_collate_dicts_nested():
    batch = [{"x": np.ones((2, 2), np.float32) * i, "meta": {"id": i, "tag": ("p", i)}}
             for i in range(3)]
    out = default_collate(batch)
    assert set(out) == {"x", "meta"}
    assert out["x"].shape == (3, 2, 2) and out["x"].dtype is sf.float32
    assert np.asarray(out["x"])[:, 0, 0].tolist() == [0.0, 1.0, 2.0]
    assert np.asarray(out["meta"]["id"]).tolist() == [0, 1, 2]
    assert out["meta"]["tag"][0] == ("p", "p", "p")  # as PyTorch: the tuple zip gives
    od = default_collate([collections.OrderedDict(b=1, a=2)] * 2)
    assert isinstance(od, collections.OrderedDict) and list(od) == ["b", "a"]


def test_collate_tensors_arrays_scalars_namedtuples():
    t = default_collate([sf.ones(2, 3, dtype=sf.float16), sf.zeros(2, 3, dtype=sf.float16)])
    assert t.shape == (2, 2, 3) and t.dtype is sf.float16
    s = default_collate([np.float32(1), np.float32(2)])
    assert s.shape == (2,) and s.dtype is sf.float32
    P = collections.namedtuple("P", "x y")
    p = default_collate([P(1, 2.0), P(3, 4.0)])
    assert isinstance(p, P) and np.asarray(p.x).tolist() == [1, 3]
    lists = default_collate([[1, 2], [3, 4]])
    assert isinstance(lists, list) and np.asarray(lists[0]).tolist() == [1, 3]


def test_collate_errors():
    with pytest.raises(ShapeError, match=r"\[3\] and \[4\]"):
        default_collate([sf.zeros(3), sf.zeros(4)])
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError):
        default_collate([object(), object()])


# ---- random_split ----------------------------------------------------------------------------

@pytest.mark.parametrize("n,lengths", [
    (10, [3, 7]), (10, [0.3, 0.3, 0.4]), (11, [0.5, 0.5]), (7, [0.2, 0.2, 0.2, 0.4]),
    (1797, [0.8, 0.2]), (5, [1.0]), (4, [0.1, 0.9]),
])
def test_random_split_sizes_match_pytorch(n, lengths):
    torch = pytest.importorskip("torch")
    want = [len(s) for s in torch.utils.data.random_split(range(n), lengths)]
    parts = random_split(Squares(n), lengths, generator=sf.Generator().manual_seed(0))
    assert [len(p) for p in parts] == want
    ids = [i for p in parts for i in p.indices]
    assert sorted(ids) == list(range(n))  # disjoint and covering


def test_random_split_deterministic_and_disjoint():
    ds = _ids(50)
    a = random_split(ds, [20, 20, 10], generator=sf.Generator().manual_seed(4))
    b = random_split(ds, [20, 20, 10], generator=sf.Generator().manual_seed(4))
    c = random_split(ds, [20, 20, 10], generator=sf.Generator().manual_seed(5))
    assert [p.indices for p in a] == [p.indices for p in b]
    assert [p.indices for p in a] != [p.indices for p in c]
    sets = [set(p.indices) for p in a]
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    assert a[0].indices != sorted(a[0].indices)  # shuffled, not a contiguous cut


def test_random_split_bad_lengths():
    with pytest.raises(ValueError, match="sum to 9"):
        random_split(Squares(10), [4, 5])
    with pytest.raises(ValueError):
        random_split(Squares(10), [0.5, 0.6])


# ---- digits --------------------------------------------------------------------------------

def test_digits_all():
    ds = D.digits("all")
    x, y = ds.tensors
    assert len(ds) == 1797
    assert x.shape == (1797, 1, 8, 8) and x.dtype is sf.float32
    assert y.shape == (1797,) and y.dtype is sf.int64
    xs, ys = np.asarray(x), np.asarray(y)
    assert xs.min() == 0.0 and xs.max() == 1.0
    assert np.array_equal(np.unique(ys), np.arange(10))
    assert np.bincount(ys).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert np.array_equal(xs * 16, np.round(xs * 16))  # pixel counts 0..16, divided by 16
    raw = np.asarray(D.digits("all", normalize=False).tensors[0])
    assert raw.max() == 16.0 and np.array_equal(raw / 16, xs)


def test_digits_match_scikit_learn_copy():
    datasets = pytest.importorskip("sklearn.datasets")
    ref = datasets.load_digits()
    x, y = D.digits("all", normalize=False).tensors
    assert np.array_equal(np.asarray(x)[:, 0], ref.images)
    assert np.array_equal(np.asarray(y), ref.target)


def test_digits_split_fixed_disjoint_stratified():
    train, test = D.digits("train"), D.digits("test")
    assert (len(train), len(test)) == (1437, 360)
    assert np.bincount(np.asarray(test.tensors[1])).tolist() == [36] * 10

    def rows(ds):
        x, y = (np.asarray(t) for t in ds.tensors)
        return np.concatenate([x.reshape(len(y), -1) * 16, y[:, None]], axis=1)

    both = np.concatenate([rows(train), rows(test)])
    everything = rows(D.digits("all"))
    assert np.array_equal(np.unique(both, axis=0, return_counts=True)[1],
                          np.unique(everything, axis=0, return_counts=True)[1])
    assert np.array_equal(rows(D.digits("train")), rows(train))  # the same split every call
    with pytest.raises(ValueError):
        D.digits("valid")


def test_digits_arrays_are_not_shared_between_calls():
    a = D.digits("test")
    a.tensors[0]._data[:] = 5.0
    assert np.asarray(D.digits("test").tensors[0]).max() == 1.0


# ---- the text corpus -------------------------------------------------------------------------

def test_text_corpus():
    text = D.text_corpus()
    assert isinstance(text, str) and len(text) == 517_571
    assert text.startswith("HAMLET, PRINCE OF DENMARK")
    assert "To be, or not to be" in text and "O Romeo, Romeo!" in text
    assert len(set(text)) == 76 and text.isascii()
    with pytest.raises(ValueError):
        D.text_corpus("nope")


def test_char_dataset_encode_decode_and_windows():
    text = "hello world, hello shapeflow"
    ds = D.CharDataset(text, block_size=5)
    assert ds.vocab == sorted(set(text)) and ds.vocab_size == len(set(text))
    assert ds.decode(ds.encode(text)) == text
    assert all(ds.itos[ds.stoi[c]] == c for c in ds.vocab)
    assert len(ds) == len(text) - 5
    for i in (0, 7, len(ds) - 1):
        x, y = ds[i]
        assert x.dtype is sf.int64 and x.shape == (5,) == y.shape
        assert ds.decode(x) == text[i:i + 5] and ds.decode(y) == text[i + 1:i + 6]
        assert np.array_equal(np.asarray(x)[1:], np.asarray(y)[:-1])
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(ValueError, match="'#'"):
        ds.encode("#")
    with pytest.raises(ShapeError):
        D.CharDataset("abc", block_size=3)


def test_char_dataset_split():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    whole = D.CharDataset(text, 8)
    train, val = D.CharDataset(text, 8, split="train"), D.CharDataset(text, 8, split="val")
    assert len(whole.train_ids) == 900 and len(whole.val_ids) == 100
    assert np.array_equal(np.concatenate([whole.train_ids, whole.val_ids]), whole.ids)
    assert whole.decode(whole.train_ids) == text[:900]
    assert (len(whole), len(train), len(val)) == (992, 892, 92)
    assert train.decode(train[0][0]) == text[:8] and val.decode(val[0][0]) == text[900:908]
    assert train.vocab == val.vocab == whole.vocab
    with pytest.raises(ValueError):
        D.CharDataset(text, 8, split="test")


def test_char_lm_splits_and_batches():
    train, val = D.char_lm(32, "train"), D.char_lm(32, "val")
    text = D.text_corpus()
    cut = int(len(text) * 0.9)
    assert len(train) == cut - 32 and len(val) == len(text) - cut - 32
    assert train.vocab == val.vocab == sorted(set(text))
    assert np.array_equal(D.CharDataset(text, 32).train_ids, train.data)
    s = text[1000:1400]
    assert train.decode(train.encode(s)) == s
    x, y = next(iter(DataLoader(val, batch_size=8, shuffle=True, seed=0)))
    assert x.shape == (8, 32) and y.shape == (8, 32) and x.dtype is sf.int64
    xs, ys = np.asarray(x), np.asarray(y)
    assert np.array_equal(xs[:, 1:], ys[:, :-1])
    for row_x, row_y in zip(xs, ys):
        start = text.index(val.decode(row_x), cut)
        assert val.decode(row_y) == text[start + 1:start + 33]
    # the batched fast path gives what per-sample fetching gives
    slow = next(iter(DataLoader(val, batch_size=8, shuffle=True, seed=0,
                                collate_fn=default_collate)))
    assert np.array_equal(np.asarray(slow[0]), xs) and np.array_equal(np.asarray(slow[1]), ys)
    with pytest.raises(ValueError):
        D.char_lm(32, "test")
