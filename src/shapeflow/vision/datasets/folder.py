"""DatasetFolder and ImageFolder: samples from root/<class>/**/<file>, classes sorted."""

from __future__ import annotations

import os
from collections.abc import Callable

from ...errors import ShapeError
from .._image import pil
from .utils import DatasetError
from .vision import VisionDataset

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class FolderNotFoundError(DatasetError, FileNotFoundError):
    """No class folder, or no valid file in a class folder (torchvision: FileNotFoundError)."""

    kind = "FolderNotFoundError"


def has_file_allowed_extension(filename: str, extensions: str | tuple[str, ...]) -> bool:
    """Whether filename ends with one of the extensions (case-insensitive)."""
    return filename.lower().endswith(extensions if isinstance(extensions, str)
                                     else tuple(extensions))


def is_image_file(filename: str) -> bool:
    """Whether filename has an image extension."""
    return has_file_allowed_extension(filename, IMG_EXTENSIONS)


def find_classes(directory) -> tuple[list[str], dict[str, int]]:
    """The sorted subfolder names of directory, and their indices."""
    try:
        classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    except FileNotFoundError as err:
        raise FolderNotFoundError(f"no such directory: {directory}", op="find_classes") from err
    if not classes:
        raise FolderNotFoundError(f"Couldn't find any class folder in {directory}.",
                                  op="find_classes", hint="root holds one folder per class")
    return classes, {name: i for i, name in enumerate(classes)}


def make_dataset(directory, class_to_idx: dict[str, int] | None = None,
                 extensions: str | tuple[str, ...] | None = None,
                 is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> list[tuple[str, int]]:
    """(path, class index) of every valid file, classes in sorted order, files sorted."""
    directory = os.path.expanduser(directory)
    if class_to_idx is None:
        _, class_to_idx = find_classes(directory)
    elif not class_to_idx:
        raise ShapeError("'class_to_index' must have at least one entry to collect any samples.",
                         op="make_dataset")
    if (extensions is None) == (is_valid_file is None):
        raise ShapeError("Both extensions and is_valid_file cannot be None or not None at the "
                         "same time", op="make_dataset", hint="pass exactly one of them")
    if extensions is not None:
        def is_valid_file(x: str) -> bool:
            return has_file_allowed_extension(x, extensions)
    instances, found = [], set()
    for target_class in sorted(class_to_idx):
        target_dir = os.path.join(directory, target_class)
        if not os.path.isdir(target_dir):
            continue
        for root, _, fnames in sorted(os.walk(target_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(root, fname)
                if is_valid_file(path):
                    instances.append((path, class_to_idx[target_class]))
                    found.add(target_class)
    empty = set(class_to_idx) - found
    if empty and not allow_empty:
        msg = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
        if extensions is not None:
            msg += "Supported extensions are: " + (
                extensions if isinstance(extensions, str) else ", ".join(extensions))
        raise FolderNotFoundError(msg, op="make_dataset", hint="allow_empty=True skips them")
    return instances


def pil_loader(path) -> object:
    """The file as an RGB PIL image."""
    with open(path, "rb") as f:
        return pil().open(f).convert("RGB")


def default_loader(path) -> object:
    """pil_loader (shapeflow has no accimage backend)."""
    return pil_loader(path)


class DatasetFolder(VisionDataset):
    """Samples root/<class>/.../<file> read by loader; target is the class index."""

    def __init__(self, root, loader: Callable, extensions: tuple[str, ...] | None = None,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        classes, class_to_idx = self.find_classes(self.root)
        samples = self.make_dataset(self.root, class_to_idx=class_to_idx, extensions=extensions,
                                    is_valid_file=is_valid_file, allow_empty=allow_empty)
        self.loader, self.extensions = loader, extensions
        self.classes, self.class_to_idx = classes, class_to_idx
        self.samples = samples
        self.targets = [s[1] for s in samples]

    @staticmethod
    def make_dataset(directory, class_to_idx: dict[str, int],
                     extensions: tuple[str, ...] | None = None,
                     is_valid_file: Callable[[str], bool] | None = None,
                     allow_empty: bool = False) -> list[tuple[str, int]]:
        """The (path, class index) samples; override to change how files are found."""
        if class_to_idx is None:
            raise ShapeError("The class_to_idx parameter cannot be None.", op="make_dataset")
        return make_dataset(directory, class_to_idx, extensions=extensions,
                            is_valid_file=is_valid_file, allow_empty=allow_empty)

    def find_classes(self, directory) -> tuple[list[str], dict[str, int]]:
        """The classes and their indices; override for another folder structure."""
        return find_classes(directory)

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        return self._transformed(self.loader(path), target)

    def __len__(self) -> int:
        return len(self.samples)


class ImageFolder(DatasetFolder):
    """DatasetFolder of images (IMG_EXTENSIONS), loaded as RGB PIL images."""

    def __init__(self, root, transform: Callable | None = None,
                 target_transform: Callable | None = None, loader: Callable = default_loader,
                 is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> None:
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None,
                         transform=transform, target_transform=target_transform,
                         is_valid_file=is_valid_file, allow_empty=allow_empty)
        self.imgs = self.samples
