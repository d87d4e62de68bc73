"""`torch.utils.data` under its PyTorch name: shapeflow.data's datasets, loader and samplers.

`from shapeflow.utils.data import DataLoader, TensorDataset, random_split` runs as the
PyTorch line does; the objects are shapeflow.data's (one implementation, two names).
"""

from __future__ import annotations

from ..data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    get_worker_info,
    random_split,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
    "DistributedSampler", "IterableDataset",
    "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler",
    "TensorDataset", "WeightedRandomSampler", "default_collate", "get_worker_info",
    "random_split",
]
