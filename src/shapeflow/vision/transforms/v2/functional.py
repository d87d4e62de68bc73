"""torchvision.transforms.v2.functional: v1's functional ops plus to_image and to_dtype."""

from __future__ import annotations

import numpy as np

from ....dtypes import get_dtype
from ....tensor import Tensor
from ..._image import array, is_tensor, max_value, wrap
from .. import functional as _v1
from ..functional import *  # noqa: F403 (v2's functional names are v1's)
from ..functional import convert_image_dtype, pil_to_tensor


def to_image(inpt) -> Tensor:
    """A PIL image, HWC ndarray or tensor as a [C, H, W] tensor of its own dtype."""
    if isinstance(inpt, np.ndarray):
        a = inpt[:, :, None] if inpt.ndim == 2 else inpt
        return wrap(a.transpose(2, 0, 1))
    if is_tensor(inpt):
        return inpt if inpt.ndim >= 3 else wrap(array(inpt)[None])
    return pil_to_tensor(inpt)


def to_dtype(inpt: Tensor, dtype=None, scale: bool = False) -> Tensor:
    """inpt in dtype; scale=True rescales as convert_image_dtype."""
    target = get_dtype(dtype or "float32").np
    a = array(inpt)
    if scale and a.dtype.kind in "iub" and target.kind == "f":
        return wrap(a.astype(target) * target.type(1.0 / max_value(a.dtype)))  # v2 multiplies
    if scale:
        return convert_image_dtype(inpt, dtype)
    return wrap(a.astype(target))


__all__ = [*_v1.__all__, "to_dtype", "to_image"]
