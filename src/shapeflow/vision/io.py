"""torchvision.io's image reading: read_image / decode_image into uint8 [C, H, W] tensors."""

from __future__ import annotations

import io as _io
import os
from enum import Enum

import numpy as np

from ..errors import DTypeError, ShapeflowError
from ..tensor import Tensor
from ._image import array, is_tensor, pil, wrap


class ImageReadError(ShapeflowError, RuntimeError):
    """An image file that could not be read or decoded."""

    kind = "ImageReadError"


class ImageReadMode(Enum):
    """Which channels read_image returns, as torchvision.io.ImageReadMode."""

    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = 4


_CONVERT = {ImageReadMode.GRAY: "L", ImageReadMode.GRAY_ALPHA: "LA", ImageReadMode.RGB: "RGB",
            ImageReadMode.RGB_ALPHA: "RGBA"}


def _mode(mode) -> ImageReadMode:
    if isinstance(mode, str):
        return ImageReadMode[mode.upper()]
    return ImageReadMode(mode)


def read_file(path: str | os.PathLike) -> Tensor:
    """A file's bytes as a 1-d uint8 tensor."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise ImageReadError(f"read_file: cannot read {os.fspath(path)!r}: {err.strerror}",
                             op="read_file") from err
    return wrap(np.frombuffer(data, np.uint8).copy())


def decode_image(input, mode=ImageReadMode.UNCHANGED,
                 apply_exif_orientation: bool = False) -> Tensor:
    """Decode PNG / JPEG / ... bytes (a uint8 tensor) or a path into a uint8 [C, H, W] tensor."""
    if is_tensor(input):
        if input.dtype.np != np.uint8 or input.ndim != 1:
            raise DTypeError(f"decode_image: expected a 1-d uint8 tensor of encoded bytes, got "
                             f"{input.dtype} of shape {list(input.shape)}", op="decode_image",
                             hint="read_file(path) gives the bytes, or pass the path")
        source = _io.BytesIO(array(input).tobytes())
        name = "the given bytes"
    else:
        source, name = os.fspath(input), repr(os.fspath(input))
    Image = pil()
    try:
        img = Image.open(source)
        img.load()
    except (OSError, ValueError) as err:
        raise ImageReadError(f"decode_image: cannot decode {name}: {err}", op="decode_image",
                             hint="PNG, JPEG, GIF, BMP and WEBP files are read") from err
    if apply_exif_orientation:
        from PIL import ImageOps
        img = ImageOps.exif_transpose(img)
    mode = _mode(mode)
    if mode is ImageReadMode.UNCHANGED:
        if img.mode == "P":  # palette images expand to their colours, as libpng's reader
            img = img.convert("RGBA" if "transparency" in img.info else "RGB")
        elif img.mode not in ("L", "LA", "RGB", "RGBA"):
            img = img.convert("RGBA" if "A" in img.getbands() else
                              ("L" if len(img.getbands()) == 1 else "RGB"))
    else:
        img = img.convert(_CONVERT[mode])
    a = np.asarray(img, np.uint8)
    a = a[:, :, None] if a.ndim == 2 else a
    return wrap(a.transpose(2, 0, 1))


def read_image(path: str | os.PathLike, mode=ImageReadMode.UNCHANGED,
               apply_exif_orientation: bool = False) -> Tensor:
    """An image file as a uint8 [C, H, W] tensor (mode picks gray / RGB / alpha channels)."""
    if not os.path.exists(path):
        raise ImageReadError(f"read_image: no such file {os.fspath(path)!r}", op="read_image")
    return decode_image(path, mode, apply_exif_orientation)


def write_png(input: Tensor, filename: str | os.PathLike, compression_level: int = 6) -> None:
    """Write a uint8 [C, H, W] tensor (1, 2, 3 or 4 channels) as a PNG file."""
    a = array(input)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[0] not in (1, 2, 3, 4):
        raise DTypeError(f"write_png: expected a uint8 [C, H, W] tensor with 1-4 channels, got "
                         f"{input.dtype} of shape {list(a.shape)}", op="write_png")
    hwc = a.transpose(1, 2, 0)
    pil().fromarray(np.ascontiguousarray(hwc[:, :, 0] if a.shape[0] == 1 else hwc)).save(
        filename, format="PNG", compress_level=compression_level)


__all__ = ["ImageReadMode", "decode_image", "read_file", "read_image", "write_png"]
