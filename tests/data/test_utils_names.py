"""`shapeflow.utils.data` / `shapeflow.utils.checkpoint`: PyTorch's module names, and the
stream datasets and weighted sampler they add, compared with torch.utils.data."""

import math

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import shapeflow as sf
from shapeflow.utils import data as sud
from shapeflow.utils.checkpoint import checkpoint, checkpoint_sequential


def test_every_name_a_tutorial_imports_is_there():
    for name in sud.__all__:
        assert hasattr(tud, name), name  # PyTorch's names only
        assert getattr(sud, name) is getattr(sf.data, name)
    assert sf.utils.data is sud


class Stream(sud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


class TorchStream(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (None, False), (7, False)])
def test_iterable_dataset_batches_like_torch(batch_size, drop_last):
    ours = [b.numpy().tolist() if isinstance(b, sf.Tensor) else b
            for b in sud.DataLoader(Stream(7), batch_size=batch_size, drop_last=drop_last)]
    theirs = [b.tolist() if isinstance(b, torch.Tensor) else b
              for b in tud.DataLoader(TorchStream(7), batch_size=batch_size,
                                      drop_last=drop_last)]
    assert ours == theirs
    assert isinstance(Stream(1), sud.Dataset)


def test_iterable_dataset_refuses_shuffle_and_has_len_only_with_one():
    with pytest.raises(ValueError, match="shuffle"):
        sud.DataLoader(Stream(3), shuffle=True)
    with pytest.raises(TypeError):
        len(sud.DataLoader(Stream(3)))
    chained = sud.ChainDataset([Stream(2), Stream(3)])
    assert list(chained) == [0, 1, 0, 1, 2]

    class Sized(Stream):
        def __len__(self):
            return self.n

    assert len(sud.ChainDataset([Sized(2), Sized(3)])) == 5
    assert len(sud.DataLoader(Sized(7), batch_size=3)) == 3


def test_weighted_random_sampler_follows_weights():
    sf.manual_seed(0)
    w = [1.0, 0.0, 3.0]
    idx = list(sud.WeightedRandomSampler(w, 8000))
    counts = np.bincount(idx, minlength=3)
    assert counts[1] == 0
    # binomial: the share of index 2 is 0.75 +- 4.4 sigma (false-failure rate ~1e-5)
    assert abs(counts[2] / 8000 - 0.75) < 4.4 * math.sqrt(0.75 * 0.25 / 8000)
    no_repeat = list(sud.WeightedRandomSampler([1.0, 1.0, 1.0, 1.0], 4, replacement=False))
    assert sorted(no_repeat) == [0, 1, 2, 3]
    loader = sud.DataLoader(sud.TensorDataset(sf.arange(3)), batch_size=4,
                            sampler=sud.WeightedRandomSampler(w, 8))
    (batch,) = next(iter(loader))
    assert set(batch.numpy().tolist()) <= {0, 2}
    with pytest.raises(ValueError):
        sud.WeightedRandomSampler(w, 0)
    assert sud.get_worker_info() is None


def test_utils_checkpoint_takes_torch_keywords_and_matches_plain_grads():
    lin = sf.nn.Linear(4, 4)
    x = sf.randn(2, 4, requires_grad=True)
    y = checkpoint(lambda t: lin(t).tanh(), x, use_reentrant=False, preserve_rng_state=True)
    y.sum().backward()
    g = x.grad.numpy().copy()
    x.grad = None
    lin(x).tanh().sum().backward()
    np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-6)


def test_checkpoint_sequential_matches_plain_grads():
    seq = sf.nn.Sequential(*[sf.nn.Linear(3, 3) for _ in range(5)])
    x = sf.randn(2, 3, requires_grad=True)
    out = checkpoint_sequential(seq, 2, x, use_reentrant=False)
    np.testing.assert_allclose(out.detach().numpy(), seq(x).detach().numpy(), rtol=1e-6)
    out.sum().backward()
    g = x.grad.numpy().copy()
    x.grad = None
    seq(x).sum().backward()
    np.testing.assert_allclose(g, x.grad.numpy(), rtol=1e-5)
