"""CIFAR10 and CIFAR100 from their python pickled batches (cifar-10-batches-py, ...)."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable

import numpy as np

from .._image import pil
from .utils import DatasetError, check_integrity, download_and_extract_archive
from .vision import VisionDataset

# what the real batches pickle: NumPy arrays (and bytes from Python 2); nothing else loads
_ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
            ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}


class _BatchUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise DatasetError(f"CIFAR batch pickles {module}.{name}, which a CIFAR batch never "
                               "holds: refusing to load it", op="CIFAR10")
        return super().find_class(module, name)


def _load(path: str) -> dict:
    with open(path, "rb") as f:
        return _BatchUnpickler(f, encoding="latin1").load()


class CIFAR10(VisionDataset):
    """CIFAR-10: (PIL RGB image 32x32, int label) from cifar-10-batches-py."""

    base_folder = "cifar-10-batches-py"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    tgz_md5 = "c58f30108f718f92721af3b95e74349a"
    train_list = [
        ["data_batch_1", "c99cafc152244af753f735de768cd75f"],
        ["data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"],
        ["data_batch_3", "54ebc095f3ab1f0389bbae665268c751"],
        ["data_batch_4", "634d18415352ddfa80567beed471001a"],
        ["data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb"],
    ]
    test_list = [["test_batch", "40351d587109b95175f43aff81a1287e"]]
    meta = {"filename": "batches.meta", "key": "label_names",
            "md5": "5ff9c542aee3614f3951f8cda6e48888"}

    def __init__(self, root, train: bool = True, transform: Callable | None = None,
                 target_transform: Callable | None = None, download: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        if not self._check_integrity():
            raise DatasetError(
                f"{type(self).__name__}: dataset not found or corrupted in "
                f"{os.path.join(self.root, self.base_folder)}", op=type(self).__name__,
                hint="use download=True to download it (md5s are checked)")
        data, self.targets = [], []
        for name, _ in self.train_list if train else self.test_list:
            entry = _load(os.path.join(self.root, self.base_folder, name))
            data.append(entry["data"])
            self.targets.extend(entry["labels"] if "labels" in entry else entry["fine_labels"])
        self.data = np.vstack(data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # HWC
        path = os.path.join(self.root, self.base_folder, self.meta["filename"])
        if not check_integrity(path, self.meta["md5"]):
            raise DatasetError(f"{type(self).__name__}: metadata file {path} not found or "
                               "corrupted", op=type(self).__name__,
                               hint="use download=True to download it")
        self.classes = _load(path)[self.meta["key"]]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def _check_integrity(self) -> bool:
        return all(check_integrity(os.path.join(self.root, self.base_folder, name), md5)
                   for name, md5 in self.train_list + self.test_list)

    def download(self) -> None:
        """Download and unpack the archive, unless its batches are there already."""
        if self._check_integrity():
            return
        download_and_extract_archive(self.url, self.root, filename=self.filename,
                                     md5=self.tgz_md5)

    def __getitem__(self, index: int):
        img, target = pil().fromarray(self.data[index]), self.targets[index]
        return self._transformed(img, target)

    def __len__(self) -> int:
        return len(self.data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train is True else 'Test'}"


class CIFAR100(CIFAR10):
    """CIFAR-100: 100 fine classes, from cifar-100-python/{train,test,meta}."""

    base_folder = "cifar-100-python"
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    filename = "cifar-100-python.tar.gz"
    tgz_md5 = "eb9058c3a382ffc7106e4002c42a8d85"
    train_list = [["train", "16019d7e3df5f24257cddd939b257f8d"]]
    test_list = [["test", "f0ef6b0ae62326f3e7ffdfab6717acfc"]]
    meta = {"filename": "meta", "key": "fine_label_names",
            "md5": "7973b15100ade9c7d40fb424638fde48"}
