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

__all__ = [
    "BatchSampler", "CharDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
    "RandomSampler",
    "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset", "char_lm",
    "datasets", "default_collate", "digits", "random_split", "text_corpus",
]
