"""torchvision.transforms: image transforms on PIL images and [..., C, H, W] tensors."""

from __future__ import annotations

from . import functional, v2
from .functional import InterpolationMode
from .transforms import (
    CenterCrop,
    ColorJitter,
    Compose,
    ConvertImageDtype,
    Grayscale,
    Lambda,
    Normalize,
    Pad,
    PILToTensor,
    RandomApply,
    RandomChoice,
    RandomCrop,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomOrder,
    RandomResizedCrop,
    RandomVerticalFlip,
    Resize,
    ToPILImage,
    ToTensor,
)

__all__ = [
    "CenterCrop", "ColorJitter", "Compose", "ConvertImageDtype", "Grayscale",
    "InterpolationMode", "Lambda", "Normalize", "PILToTensor", "Pad", "RandomApply",
    "RandomChoice", "RandomCrop", "RandomGrayscale", "RandomHorizontalFlip", "RandomOrder",
    "RandomResizedCrop", "RandomVerticalFlip", "Resize", "ToPILImage", "ToTensor", "functional",
    "v2",
]
