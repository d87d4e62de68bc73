"""What vision's parts share: Pillow (imported only when needed), and images as NumPy arrays."""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError, ShapeflowError
from ..tensor import Tensor, from_numpy


class MissingPillowError(ShapeflowError, ImportError):
    """Pillow, the image library shapeflow.vision reads and writes images with, is missing."""

    kind = "MissingPillowError"


def pil():
    """PIL.Image, or a clear error saying how to install Pillow."""
    try:
        from PIL import Image
    except ImportError as err:
        raise MissingPillowError(
            "shapeflow.vision needs Pillow for PIL images, but it is not installed",
            hint="pip install pillow (or pip install 'shapeflow[vision]')") from err
    return Image


def is_pil(x) -> bool:
    """Whether x is a PIL image (False when Pillow is absent)."""
    try:
        from PIL import Image
    except ImportError:
        return False
    return isinstance(x, Image.Image)


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


def array(t: Tensor) -> np.ndarray:
    """A tensor's values (detached: transforms treat images as data)."""
    return t.detach().numpy()


def wrap(a: np.ndarray) -> Tensor:
    return from_numpy(np.ascontiguousarray(a))


def check_image(x, op: str) -> None:
    """A PIL image or a tensor of at least 2 dims ([..., H, W]); else a clear error."""
    if is_pil(x):
        return
    if not is_tensor(x):
        raise DTypeError(f"{op}: expected a PIL image or a shapeflow Tensor, got "
                         f"{type(x).__name__}", op=op,
                         hint="convert a NumPy array with transforms.ToTensor() or sf.tensor(x)")
    if x.ndim < 2:
        raise ShapeError(f"{op}: an image tensor needs at least 2 dims [..., H, W], got "
                         f"shape {list(x.shape)}", op=op)


def max_value(dtype: np.dtype) -> float:
    """The value of full intensity: 1.0 for floats, the largest value for integers."""
    if np.issubdtype(dtype, np.floating):
        return 1.0
    if dtype == np.bool_:
        return 1
    return int(np.iinfo(dtype).max)
