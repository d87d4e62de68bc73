"""MNIST and FashionMNIST from torchvision's layout: <root>/<Name>/raw/*-idx?-ubyte."""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable

import numpy as np

from ...tensor import Tensor
from .._image import pil, wrap
from .utils import DatasetError, DownloadError, check_integrity, download_and_extract_archive
from .vision import VisionDataset

# idx files: a big-endian magic (type code * 256 + number of dims), then the sizes
_IDX_TYPES = {8: np.uint8, 9: np.int8, 11: ">i2", 12: ">i4", 13: ">f4", 14: ">f8"}


def _read_bytes(path: str) -> bytes:
    if not os.path.isfile(path) and os.path.isfile(path + ".gz"):
        with gzip.open(path + ".gz", "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def read_sn3_pascalvincent_array(path: str) -> np.ndarray:
    """An idx (LeCun's MNIST) file as a NumPy array; path.gz is read when path is absent."""
    data = _read_bytes(path)
    magic = int.from_bytes(data[0:4], "big")
    nd, ty = magic % 256, magic // 256
    if not 1 <= nd <= 3 or ty not in _IDX_TYPES:
        raise DatasetError(f"{path} is not an idx file (magic number {magic:#x})",
                           op="read_sn3_pascalvincent_tensor")
    shape = [int.from_bytes(data[4 * (i + 1):4 * (i + 2)], "big") for i in range(nd)]
    dtype = np.dtype(_IDX_TYPES[ty])
    count = int(np.prod(shape))
    if len(data) < 4 * (nd + 1) + count * dtype.itemsize:
        raise DatasetError(f"{path} is truncated: its header says {shape}",
                           op="read_sn3_pascalvincent_tensor")
    flat = np.frombuffer(data, dtype, count, offset=4 * (nd + 1))
    return flat.astype(dtype.newbyteorder("=")).reshape(shape)


def read_sn3_pascalvincent_tensor(path: str, strict: bool = True) -> Tensor:
    """An idx file as a tensor."""
    return wrap(read_sn3_pascalvincent_array(path))


class MNIST(VisionDataset):
    """LeCun's handwritten digits: (PIL 'L' image 28x28, int label)."""

    mirrors = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
               "http://yann.lecun.com/exdb/mnist/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
               "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train: bool = True, transform: Callable | None = None,
                 target_transform: Callable | None = None, download: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        if not self._check_exists():
            raise DatasetError(
                f"{type(self).__name__}: dataset not found in {self.raw_folder}",
                op=type(self).__name__, hint="use download=True to download it, or place "
                "the idx files (train-images-idx3-ubyte, ...; .gz too) there")
        prefix = "train" if train else "t10k"
        images = read_sn3_pascalvincent_array(
            os.path.join(self.raw_folder, f"{prefix}-images-idx3-ubyte"))
        labels = read_sn3_pascalvincent_array(
            os.path.join(self.raw_folder, f"{prefix}-labels-idx1-ubyte"))
        if images.dtype != np.uint8 or images.ndim != 3 or labels.ndim != 1 \
                or len(images) != len(labels):
            raise DatasetError(f"{type(self).__name__}: images {images.dtype} {images.shape} "
                               f"and labels {labels.shape} do not fit together",
                               op=type(self).__name__)
        self._images, self._labels = images, labels.astype(np.int64)
        self.data, self.targets = wrap(images), wrap(self._labels)

    @property
    def raw_folder(self) -> str:
        return os.path.join(self.root, type(self).__name__, "raw")

    @property
    def processed_folder(self) -> str:
        return os.path.join(self.root, type(self).__name__, "processed")

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.classes)}

    def _check_exists(self) -> bool:
        names = [os.path.join(self.raw_folder, os.path.splitext(f)[0]) for f, _ in self.resources]
        return all(check_integrity(n) or check_integrity(n + ".gz") for n in names)

    def download(self) -> None:
        """Download and unpack the idx files, unless they are there already."""
        if self._check_exists():
            return
        os.makedirs(self.raw_folder, exist_ok=True)
        for filename, md5 in self.resources:
            errors = []
            for mirror in self.mirrors:
                try:
                    download_and_extract_archive(mirror + filename, self.raw_folder,
                                                 filename=filename, md5=md5)
                    break
                except DownloadError as err:
                    errors.append(f"  tried {mirror}: {err.message}")
            else:
                raise DownloadError(f"{type(self).__name__}: could not download {filename}:\n"
                                    + "\n".join(errors), op="download",
                                    hint=f"place the files in {self.raw_folder} by hand")

    def __getitem__(self, index: int):
        img, target = pil().fromarray(self._images[index]), int(self._labels[index])
        return self._transformed(img, target)

    def __len__(self) -> int:
        return len(self._images)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train is True else 'Test'}"


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: 28x28 clothing images in 10 classes."""

    mirrors = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources = [
        ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ]
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]
