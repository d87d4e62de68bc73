"""Datasets and the DataLoader (as `torch.utils.data`), and small bundled datasets."""

from __future__ import annotations

from . import datasets
from .dataloader import (
    BatchSampler,
    DataLoader,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    default_collate,
)
from .dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from .datasets import CharDataset, char_lm, digits, text_corpus
from .distributed import DistributedSampler
from .iterable import ChainDataset, IterableDataset, WeightedRandomSampler, get_worker_info

__all__ = [
    "BatchSampler", "ChainDataset", "CharDataset", "ConcatDataset", "DataLoader", "Dataset",
    "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler",
    "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "char_lm",
    "datasets", "default_collate", "digits", "get_worker_info", "random_split", "text_corpus",
]
