"""torchvision.transforms' classes; random ones draw from shapeflow's global generator
(seed it with sf.manual_seed, as torchvision's with torch.manual_seed)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence

import numpy as np

from ...errors import DTypeError, ShapeError
from ...random import get_rng
from ...tensor import Tensor
from . import functional as F
from .functional import InterpolationMode


def _rng() -> np.random.Generator:
    return get_rng(None)


def _size_pair(size, op: str) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    size = tuple(size)
    if len(size) == 1:
        return size[0], size[0]
    if len(size) != 2:
        raise ShapeError(f"{op}: please provide only two dimensions (h, w) for size, got {size}",
                         op=op)
    return size


class _Transform:
    """A callable with torchvision's repr: ClassName(arg=value, ...)."""

    def _args(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._args()})"


class Compose(_Transform):
    """Apply transforms one after another."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        return "Compose(\n" + "".join(f"    {t}\n" for t in self.transforms) + ")"


class ToTensor(_Transform):
    """PIL image or HWC ndarray -> float [C, H, W] tensor in [0, 1]."""

    def __call__(self, pic) -> Tensor:
        return F.to_tensor(pic)


class PILToTensor(_Transform):
    """PIL image -> [C, H, W] tensor of its own dtype, unscaled."""

    def __call__(self, pic) -> Tensor:
        return F.pil_to_tensor(pic)


class ConvertImageDtype(_Transform):
    """A tensor image in another dtype, values rescaled."""

    def __init__(self, dtype) -> None:
        self.dtype = dtype

    def __call__(self, image: Tensor) -> Tensor:
        return F.convert_image_dtype(image, self.dtype)


class ToPILImage(_Transform):
    """[C, H, W] tensor or HWC ndarray -> PIL image."""

    def __init__(self, mode: str | None = None) -> None:
        self.mode = mode

    def __call__(self, pic):
        return F.to_pil_image(pic, self.mode)


class Normalize(_Transform):
    """(x - mean) / std per channel of a float tensor image."""

    def __init__(self, mean, std, inplace: bool = False) -> None:
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor: Tensor) -> Tensor:
        return F.normalize(tensor, self.mean, self.std, self.inplace)

    def _args(self) -> str:
        return f"mean={self.mean}, std={self.std}"


class Resize(_Transform):
    """Resize to (h, w), or the smaller edge to an int size."""

    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None,
                 antialias: bool | None = True) -> None:
        self.size = [size] if isinstance(size, int) else list(size)
        self.interpolation = F._mode(interpolation)
        self.max_size, self.antialias = max_size, antialias

    def __call__(self, img):
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)

    def _args(self) -> str:
        return (f"size={self.size}, interpolation={self.interpolation.value}, "
                f"max_size={self.max_size}, antialias={self.antialias}")


class CenterCrop(_Transform):
    """The centre crop of size (h, w)."""

    def __init__(self, size) -> None:
        self.size = _size_pair(size, "CenterCrop")

    def __call__(self, img):
        return F.center_crop(img, self.size)

    def _args(self) -> str:
        return f"size={self.size}"


class Pad(_Transform):
    """Pad the sides with fill, or in edge / reflect / symmetric mode."""

    def __init__(self, padding, fill=0, padding_mode: str = "constant") -> None:
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def __call__(self, img):
        return F.pad(img, self.padding, self.fill, self.padding_mode)

    def _args(self) -> str:
        return f"padding={self.padding}, fill={self.fill}, padding_mode={self.padding_mode}"


class Lambda(_Transform):
    """A user function as a transform."""

    def __init__(self, lambd: Callable) -> None:
        if not callable(lambd):
            raise DTypeError(f"Lambda: lambd should be callable, got {type(lambd).__name__}",
                             op="Lambda")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)


class Grayscale(_Transform):
    """Luma, 1 or 3 channels."""

    def __init__(self, num_output_channels: int = 1) -> None:
        self.num_output_channels = num_output_channels

    def __call__(self, img):
        return F.rgb_to_grayscale(img, self.num_output_channels)

    def _args(self) -> str:
        return f"num_output_channels={self.num_output_channels}"


class RandomGrayscale(_Transform):
    """Grayscale (as many channels as the input) with probability p."""

    def __init__(self, p: float = 0.1) -> None:
        self.p = p

    def __call__(self, img):
        if _rng().random() < self.p:
            return F.rgb_to_grayscale(img, F.get_image_num_channels(img))
        return img

    def _args(self) -> str:
        return f"p={self.p}"


class RandomHorizontalFlip(_Transform):
    """Mirror left to right with probability p."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img):
        return F.hflip(img) if _rng().random() < self.p else img

    def _args(self) -> str:
        return f"p={self.p}"


class RandomVerticalFlip(_Transform):
    """Mirror top to bottom with probability p."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img):
        return F.vflip(img) if _rng().random() < self.p else img

    def _args(self) -> str:
        return f"p={self.p}"


class RandomApply(_Transform):
    """Apply a list of transforms together with probability p."""

    def __init__(self, transforms: Sequence[Callable], p: float = 0.5) -> None:
        self.transforms, self.p = list(transforms), p

    def __call__(self, img):
        if _rng().random() >= self.p:
            return img
        for t in self.transforms:
            img = t(img)
        return img


class RandomChoice(_Transform):
    """Apply one transform picked at random (weighted by p)."""

    def __init__(self, transforms: Sequence[Callable], p: Sequence[float] | None = None) -> None:
        self.transforms = list(transforms)
        self.p = None if p is None else [w / sum(p) for w in p]

    def __call__(self, img):
        return self.transforms[_rng().choice(len(self.transforms), p=self.p)](img)


class RandomOrder(_Transform):
    """Apply the transforms in a random order."""

    def __init__(self, transforms: Sequence[Callable]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img):
        for i in _rng().permutation(len(self.transforms)):
            img = self.transforms[i](img)
        return img


class RandomCrop(_Transform):
    """A crop of size (h, w) at a random place, after optional padding."""

    def __init__(self, size, padding=None, pad_if_needed: bool = False, fill=0,
                 padding_mode: str = "constant") -> None:
        self.size = _size_pair(size, "RandomCrop")
        self.padding, self.pad_if_needed = padding, pad_if_needed
        self.fill, self.padding_mode = fill, padding_mode

    @staticmethod
    def get_params(img, output_size) -> tuple[int, int, int, int]:
        """(top, left, h, w) of a random crop of output_size."""
        _, h, w = F.get_dimensions(img)
        th, tw = output_size
        if h < th or w < tw:
            raise ShapeError(f"RandomCrop: required crop size {(th, tw)} is larger than the "
                             f"input image size {(h, w)}", op="RandomCrop",
                             hint="pass pad_if_needed=True, or pad the image first")
        if w == tw and h == th:
            return 0, 0, h, w
        rng = _rng()
        return int(rng.integers(0, h - th + 1)), int(rng.integers(0, w - tw + 1)), th, tw

    def __call__(self, img):
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, height, width = F.get_dimensions(img)
        if self.pad_if_needed and width < self.size[1]:
            img = F.pad(img, [self.size[1] - width, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and height < self.size[0]:
            img = F.pad(img, [0, self.size[0] - height], self.fill, self.padding_mode)
        return F.crop(img, *self.get_params(img, self.size))

    def _args(self) -> str:
        return f"size={self.size}, padding={self.padding}"


class RandomResizedCrop(_Transform):
    """A crop of random area and aspect ratio, resized to size."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True) -> None:
        self.size = _size_pair(size, "RandomResizedCrop")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            raise ShapeError(f"RandomResizedCrop: scale and ratio should be of kind (min, max), "
                             f"got scale={scale}, ratio={ratio}", op="RandomResizedCrop")
        self.scale, self.ratio = scale, ratio
        self.interpolation, self.antialias = F._mode(interpolation), antialias

    @staticmethod
    def get_params(img, scale, ratio) -> tuple[int, int, int, int]:
        """(top, left, h, w) of a random crop: 10 tries, then the centre crop in ratio."""
        _, height, width = F.get_dimensions(img)
        area = height * width
        rng = _rng()
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            target_area = area * rng.uniform(scale[0], scale[1])
            aspect_ratio = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                i = int(rng.integers(0, height - h + 1))
                j = int(rng.integers(0, width - w + 1))
                return i, j, h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return F.resized_crop(img, i, j, h, w, self.size, self.interpolation, self.antialias)

    def _args(self) -> str:
        return f"size={self.size}, scale={self.scale}, ratio={self.ratio}"


def _jitter_range(value, name: str, center: float = 1.0, bound=(0, float("inf")),
                  clip_first_on_zero: bool = True):
    if value is None:
        return None
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ShapeError(f"ColorJitter: if {name} is a single number, it must be non "
                             f"negative, got {value}", op="ColorJitter")
        value = [center - float(value), center + float(value)]
        if clip_first_on_zero:
            value[0] = max(value[0], 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        value = [float(value[0]), float(value[1])]
    else:
        raise DTypeError(f"ColorJitter: {name} should be a single number or a list/tuple with "
                         f"length 2, got {value}", op="ColorJitter")
    if not bound[0] <= value[0] <= value[1] <= bound[1]:
        raise ShapeError(f"ColorJitter: {name} values should be between {bound}, got {value}",
                         op="ColorJitter")
    return None if value[0] == value[1] == center else tuple(value)


class ColorJitter(_Transform):
    """Random brightness, contrast, saturation and hue, applied in a random order."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0) -> None:
        self.brightness = _jitter_range(brightness, "brightness")
        self.contrast = _jitter_range(contrast, "contrast")
        self.saturation = _jitter_range(saturation, "saturation")
        self.hue = _jitter_range(hue, "hue", center=0, bound=(-0.5, 0.5),
                                 clip_first_on_zero=False)

    @staticmethod
    def get_params(brightness, contrast, saturation, hue):
        """(order, brightness, contrast, saturation, hue factors); None for one not jittered."""
        rng = _rng()
        order = rng.permutation(4)
        factors = [None if r is None else float(rng.uniform(r[0], r[1]))
                   for r in (brightness, contrast, saturation, hue)]
        return (order, *factors)

    def __call__(self, img):
        order, *factors = self.get_params(self.brightness, self.contrast, self.saturation,
                                          self.hue)
        ops = (F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue)
        for i in order:
            if factors[i] is not None:
                img = ops[i](img, factors[i])
        return img

    def _args(self) -> str:
        return (f"brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation}, hue={self.hue}")
