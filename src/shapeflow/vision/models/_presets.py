"""The preprocessing a weights entry expects (torchvision's `ImageClassification` preset):
resize, center crop, to float in [0, 1], normalize."""

from __future__ import annotations

from ... import nn


class ImageClassification(nn.Module):
    """Resize the short side to resize_size, center-crop crop_size, scale to [0, 1], normalize."""

    def __init__(self, *, crop_size: int, resize_size: int = 256,
                 mean: tuple[float, ...] = (0.485, 0.456, 0.406),
                 std: tuple[float, ...] = (0.229, 0.224, 0.225),
                 interpolation: object = "bilinear", antialias: bool | None = True) -> None:
        super().__init__()
        # the transforms are a sibling package: imported when a preset is built, not with models
        from ..transforms.functional import InterpolationMode

        self.crop_size = [crop_size]
        self.resize_size = [resize_size]
        self.mean = list(mean)
        self.std = list(std)
        self.interpolation = (InterpolationMode(interpolation) if isinstance(interpolation, str)
                              else interpolation)
        self.antialias = antialias

    def forward(self, img):
        from ..transforms import functional as F

        img = F.resize(img, self.resize_size, interpolation=self.interpolation,
                       antialias=self.antialias)
        img = F.center_crop(img, self.crop_size)
        if not hasattr(img, "dtype"):  # a PIL image
            img = F.pil_to_tensor(img)
        img = F.convert_image_dtype(img)
        return F.normalize(img, mean=self.mean, std=self.std)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(\n    crop_size={self.crop_size}\n"
                f"    resize_size={self.resize_size}\n    mean={self.mean}\n    std={self.std}\n"
                f"    interpolation={self.interpolation}\n)")

    def describe(self) -> str:
        """What the preset does, in torchvision's words."""
        return ("Accepts ``PIL.Image``, batched ``(B, C, H, W)`` and single ``(C, H, W)`` image "
                f"tensors. The images are resized to ``resize_size={self.resize_size}`` using "
                f"``interpolation={self.interpolation}``, followed by a central crop of "
                f"``crop_size={self.crop_size}``. Finally the values are first rescaled to "
                f"``[0.0, 1.0]`` and then normalized using ``mean={self.mean}`` and "
                f"``std={self.std}``.")
