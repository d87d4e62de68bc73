"""torchvision.transforms.v2's common names: the same transforms, called on one image or on a
sample (tuples, lists, dicts) whose images all get the same random draw and whose other
values pass through. Images are PIL images, and the first tensor when there is none."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ....random import default_generator
from ....tensor import Tensor
from ... import _image
from .. import transforms as _v1
from ..functional import InterpolationMode
from . import functional


def _leaves(sample, out: list) -> list:
    if isinstance(sample, (list, tuple)):
        for item in sample:
            _leaves(item, out)
    elif isinstance(sample, dict):
        for item in sample.values():
            _leaves(item, out)
    else:
        out.append(sample)
    return out


def _rebuild(sample, new: dict):
    if isinstance(sample, (list, tuple)):
        items = [_rebuild(item, new) for item in sample]
        return type(sample)(items) if isinstance(sample, list) else tuple(items)
    if isinstance(sample, dict):
        return {k: _rebuild(v, new) for k, v in sample.items()}
    return new.get(id(sample), sample)


def _images(sample) -> list:
    leaves = _leaves(sample, [])
    found = [x for x in leaves if _image.is_pil(x)]
    if not found:  # torchvision's heuristic: the first plain tensor (or array) is the image
        found = [x for x in leaves if isinstance(x, (Tensor, np.ndarray))][:1]
    return found


class _V2:
    """Apply the v1 transform to every image of a sample, with the same random draw each."""

    def __call__(self, *inputs):
        sample = inputs if len(inputs) > 1 else inputs[0]
        images = _images(sample)
        state = default_generator.get_state()
        new = {}
        for img in images:
            default_generator.set_state(state)  # one draw shared by all images of the sample
            new[id(img)] = self._one(img)
        return _rebuild(sample, new)


def _v2(cls: type) -> type:
    return type(cls.__name__, (_V2, cls), {"__doc__": cls.__doc__, "__module__": __name__,
                                            "_one": cls.__call__})


CenterCrop = _v2(_v1.CenterCrop)
ColorJitter = _v2(_v1.ColorJitter)
ConvertImageDtype = _v2(_v1.ConvertImageDtype)
Grayscale = _v2(_v1.Grayscale)
Normalize = _v2(_v1.Normalize)
Pad = _v2(_v1.Pad)
PILToTensor = _v2(_v1.PILToTensor)
RandomCrop = _v2(_v1.RandomCrop)
RandomGrayscale = _v2(_v1.RandomGrayscale)
RandomHorizontalFlip = _v2(_v1.RandomHorizontalFlip)
RandomResizedCrop = _v2(_v1.RandomResizedCrop)
RandomVerticalFlip = _v2(_v1.RandomVerticalFlip)
Resize = _v2(_v1.Resize)
ToPILImage = _v2(_v1.ToPILImage)
ToTensor = _v2(_v1.ToTensor)


class ToImage(_V2, _v1._Transform):
    """PIL image or HWC ndarray -> [C, H, W] tensor of its own dtype (uint8 stays uint8)."""

    def _one(self, img):
        return functional.to_image(img)


class ToDtype(_V2, _v1._Transform):
    """A tensor image in dtype; scale=True rescales values (uint8 255 <-> float 1.0)."""

    def __init__(self, dtype, scale: bool = False) -> None:
        self.dtype, self.scale = dtype, scale

    def _one(self, img):
        return functional.to_dtype(img, self.dtype, self.scale)


class ToPureTensor(_v1._Transform):
    """Identity on shapeflow tensors (they carry no image type)."""

    def __call__(self, *inputs):
        return inputs if len(inputs) > 1 else inputs[0]


Identity = ToPureTensor


class Compose(_v1.Compose):
    """Apply transforms one after another, to one input or a whole sample."""

    def __call__(self, *inputs):
        unpack = len(inputs) > 1
        for t in self.transforms:
            out = t(*inputs)
            inputs = out if unpack else (out,)
        return out if self.transforms else (inputs if unpack else inputs[0])


class Lambda(_v1.Lambda):
    """A user function applied to every value of the sample (of the given types, if any)."""

    def __init__(self, lambd: Callable, *types: type) -> None:
        super().__init__(lambd)
        self.types = types or (object,)

    def __call__(self, *inputs):
        sample = inputs if len(inputs) > 1 else inputs[0]
        new = {id(x): self.lambd(x) for x in _leaves(sample, []) if isinstance(x, self.types)}
        return _rebuild(sample, new)


class RandomApply(_v1.RandomApply):
    """Apply a list of transforms together with probability p, to one input or a sample."""

    def __call__(self, *inputs):
        sample = inputs if len(inputs) > 1 else inputs[0]
        if _v1._rng().random() >= self.p:
            return sample
        for t in self.transforms:
            sample = t(*sample) if len(inputs) > 1 else t(sample)
        return sample


class RandomChoice(_v1.RandomChoice):
    """Apply one transform picked at random (weighted by p)."""

    def __init__(self, transforms: Sequence[Callable], p: Sequence[float] | None = None) -> None:
        super().__init__(transforms, p)

    def __call__(self, *inputs):
        return self.transforms[_v1._rng().choice(len(self.transforms), p=self.p)](*inputs)


class RandomOrder(_v1.RandomOrder):
    """Apply the transforms in a random order."""

    def __call__(self, *inputs):
        sample = inputs if len(inputs) > 1 else inputs[0]
        for i in _v1._rng().permutation(len(self.transforms)):
            sample = self.transforms[i](*sample) if len(inputs) > 1 else self.transforms[i](sample)
        return sample


__all__ = [
    "CenterCrop", "ColorJitter", "Compose", "ConvertImageDtype", "Grayscale", "Identity",
    "InterpolationMode", "Lambda", "Normalize", "PILToTensor", "Pad", "RandomApply",
    "RandomChoice", "RandomCrop", "RandomGrayscale", "RandomHorizontalFlip", "RandomOrder",
    "RandomResizedCrop", "RandomVerticalFlip", "Resize", "ToDtype", "ToImage", "ToPILImage",
    "ToPureTensor", "ToTensor", "functional",
]
