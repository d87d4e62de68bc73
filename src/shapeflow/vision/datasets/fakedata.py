"""FakeData: random images and labels, the same for an index every time."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ShapeIndexError
from ...random import Generator
from .._image import wrap
from ..transforms.functional import to_pil_image
from .vision import VisionDataset


class FakeData(VisionDataset):
    """size random (PIL image of image_size [C, H, W], int label) samples; index i draws from
    shapeflow's generator seeded with i + random_offset, so samples repeat."""

    def __init__(self, size: int = 1000, image_size: tuple[int, int, int] = (3, 224, 224),
                 num_classes: int = 10, transform: Callable | None = None,
                 target_transform: Callable | None = None, random_offset: int = 0) -> None:
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.size, self.num_classes = size, num_classes
        self.image_size, self.random_offset = image_size, random_offset

    def __getitem__(self, index: int):
        if index >= len(self):
            raise ShapeIndexError(f"{type(self).__name__} index out of range: {index} of "
                                  f"{len(self)}", op=type(self).__name__)
        rng = Generator().manual_seed(index + self.random_offset).rng
        img = to_pil_image(wrap(rng.random(self.image_size, dtype="float32")))
        target = int(rng.integers(0, self.num_classes))
        return self._transformed(img, target)

    def __len__(self) -> int:
        return self.size
