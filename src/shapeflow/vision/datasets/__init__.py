"""torchvision.datasets: MNIST, FashionMNIST, CIFAR10/100 in their on-disk formats,
ImageFolder / DatasetFolder, FakeData; download=True fetches from torchvision's mirrors."""

from __future__ import annotations

from .cifar import CIFAR10, CIFAR100
from .fakedata import FakeData
from .folder import DatasetFolder, FolderNotFoundError, ImageFolder
from .mnist import MNIST, FashionMNIST
from .utils import DatasetError, DownloadError
from .vision import StandardTransform, VisionDataset

__all__ = ["CIFAR10", "CIFAR100", "DatasetError", "DatasetFolder", "DownloadError", "FakeData",
           "FashionMNIST", "FolderNotFoundError", "ImageFolder", "MNIST", "StandardTransform",
           "VisionDataset"]
