"""`torch.utils.data` under its PyTorch name: shapeflow.data's datasets, loader and samplers.

`from shapeflow.utils.data import DataLoader, TensorDataset, random_split` runs as the
PyTorch line does; the objects are shapeflow.data's (one implementation, two names).
Its files' paths work too: `from shapeflow.utils.data.dataloader import DataLoader`,
`.dataset`, `.sampler`, `.distributed`, `._utils.collate.default_collate`.
"""

from __future__ import annotations

from ...data import (
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
from . import _utils, dataloader, dataset, distributed, sampler  # noqa: F401  (torch's files)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
    "DistributedSampler", "IterableDataset",
    "RandomSampler", "Sampler", "SequentialSampler", "Subset", "SubsetRandomSampler",
    "TensorDataset", "WeightedRandomSampler", "default_collate", "get_worker_info",
    "random_split",
]


def __getattr__(name: str):
    # a name torch.utils.data has that shapeflow.data gained after this list was written
    from ._paths import file_names

    return file_names(__name__, "torch.utils.data")[0](name)
