"""torchvision.utils: make_grid and save_image."""

from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from ._image import array, is_tensor, pil, wrap


def _as_batch(tensor) -> np.ndarray:
    if isinstance(tensor, (list, tuple)):
        if not all(is_tensor(t) for t in tensor):
            raise DTypeError("make_grid: expected a tensor or a list of tensors", op="make_grid")
        shapes = {tuple(t.shape) for t in tensor}
        if len(shapes) != 1:
            raise ShapeError(f"make_grid: the images' shapes differ: {sorted(shapes)}",
                             op="make_grid", hint="resize or crop them to one size first")
        return np.stack([array(t) for t in tensor])
    if not is_tensor(tensor):
        raise DTypeError(f"make_grid: expected a tensor or a list of tensors, got "
                         f"{type(tensor).__name__}", op="make_grid")
    return array(tensor)


def make_grid(tensor: Tensor | list[Tensor], nrow: int = 8, padding: int = 2,
              normalize: bool = False, value_range: tuple[float, float] | None = None,
              scale_each: bool = False, pad_value: float = 0.0) -> Tensor:
    """Images [B, C, H, W] (or a list of [C, H, W]) tiled into one [C, H', W'] grid."""
    a = _as_batch(tensor)
    if a.ndim == 2:
        a = a[None]
    if a.ndim == 3:
        if a.shape[0] == 1:  # one gray image: three channels
            a = np.concatenate([a] * 3, 0)
        a = a[None]
    if a.ndim != 4:
        raise ShapeError(f"make_grid: expected images [B, C, H, W], got shape {list(a.shape)}",
                         op="make_grid")
    if a.shape[1] == 1:
        a = np.concatenate([a] * 3, 1)
    if normalize:
        if value_range is not None and not isinstance(value_range, tuple):
            raise DTypeError("make_grid: value_range has to be a tuple (min, max) if specified",
                             op="make_grid")
        a = a.copy()

        def norm(img: np.ndarray) -> None:
            low, high = value_range if value_range is not None else (
                float(img.min()), float(img.max()))
            ft = img.dtype.type
            np.clip(img, ft(low), ft(high), out=img)
            img -= ft(low)
            img /= ft(max(high - low, 1e-5))
        for img in (a if scale_each else [a]):
            norm(img)
    if a.shape[0] == 1:
        return wrap(a[0])
    nmaps = a.shape[0]
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = a.shape[2] + padding, a.shape[3] + padding
    grid = np.full((a.shape[1], height * ymaps + padding, width * xmaps + padding), pad_value,
                   a.dtype)
    for k in range(nmaps):
        y, x = divmod(k, xmaps)
        grid[:, y * height + padding:(y + 1) * height, x * width + padding:(x + 1) * width] = a[k]
    return wrap(grid)


def save_image(tensor: Tensor | list[Tensor], fp, format: str | None = None, **kwargs) -> None:
    """Write images in [0, 1] to an image file (one grid, as make_grid's kwargs say)."""
    grid = array(make_grid(tensor, **kwargs))
    ft = grid.dtype.type if grid.dtype.kind == "f" else np.float32
    ndarr = np.clip(grid * ft(255) + ft(0.5), 0, 255).transpose(1, 2, 0).astype(np.uint8)
    pil().fromarray(np.ascontiguousarray(ndarr)).save(fp, format=format)


__all__ = ["make_grid", "save_image"]
