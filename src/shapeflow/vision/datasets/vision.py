"""VisionDataset: the base of vision datasets (root, transforms, torchvision's repr)."""

from __future__ import annotations

import os
from collections.abc import Callable

from ...data.dataset import Dataset
from ...errors import ShapeError


class StandardTransform:
    """transform on the input and target_transform on the target."""

    def __init__(self, transform: Callable | None = None,
                 target_transform: Callable | None = None) -> None:
        self.transform, self.target_transform = transform, target_transform

    def __call__(self, input, target):
        if self.transform is not None:
            input = self.transform(input)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return input, target

    def __repr__(self) -> str:
        body = [type(self).__name__]
        for head, t in (("Transform: ", self.transform),
                        ("Target transform: ", self.target_transform)):
            if t is not None:
                lines = repr(t).splitlines()
                body += [head + lines[0]] + [" " * len(head) + line for line in lines[1:]]
        return "\n".join(body)


class VisionDataset(Dataset):
    """A dataset under root with transform / target_transform (or joint transforms)."""

    _repr_indent = 4

    def __init__(self, root=None, transforms: Callable | None = None,
                 transform: Callable | None = None,
                 target_transform: Callable | None = None) -> None:
        self.root = os.path.expanduser(root) if isinstance(root, str) else root
        separate = transform is not None or target_transform is not None
        if transforms is not None and separate:
            raise ShapeError("Only transforms or transform/target_transform can be passed as "
                             "argument", op=type(self).__name__)
        self.transform, self.target_transform = transform, target_transform
        self.transforms = StandardTransform(transform, target_transform) if separate \
            else transforms

    def __getitem__(self, index: int):
        raise NotImplementedError

    def _transformed(self, img, target):
        """(img, target) through transform and target_transform, read now (users swap them)."""
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self) -> int:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        body = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        if self.transforms is not None:
            body.append(repr(self.transforms))  # torchvision indents its first line only
        return "\n".join([f"Dataset {type(self).__name__}"]
                         + [" " * self._repr_indent + line for line in body])
