"""torchvision.transforms.functional's ops on PIL images and [..., C, H, W] tensors.

PIL images go through Pillow as torchvision's do (same pixels); tensors through NumPy with
torchvision's arithmetic (float32 steps in the same order, antialiased resize as torch's).
"""

from __future__ import annotations

import math
import numbers
from enum import Enum

import numpy as np

from ...dtypes import get_dtype
from ...errors import DTypeError, ShapeError, ShapeRuntimeError
from ...tensor import Tensor
from .._image import array, check_image, is_pil, is_tensor, max_value, pil, wrap


class InterpolationMode(Enum):
    """Interpolation modes, as torchvision.transforms.InterpolationMode."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL_MODES = {"nearest": 0, "nearest-exact": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3,
              "box": 4, "hamming": 5}  # PIL.Image.Resampling's numbers
_FROM_INT = {0: InterpolationMode.NEAREST, 2: InterpolationMode.BILINEAR,
             3: InterpolationMode.BICUBIC, 4: InterpolationMode.BOX,
             5: InterpolationMode.HAMMING, 1: InterpolationMode.LANCZOS}


def _mode(interpolation) -> InterpolationMode:
    if isinstance(interpolation, InterpolationMode):
        return interpolation
    if isinstance(interpolation, int) and interpolation in _FROM_INT:
        return _FROM_INT[interpolation]
    if isinstance(interpolation, str):
        return InterpolationMode(interpolation)
    raise DTypeError(f"interpolation should be an InterpolationMode or a PIL integer constant, "
                     f"got {interpolation!r}", op="resize")


# ---- conversions --------------------------------------------------------------------------
def to_tensor(pic) -> Tensor:
    """A PIL image or HWC ndarray as a [C, H, W] tensor; uint8 scaled to float32 in [0, 1]."""
    if isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ShapeError(f"to_tensor: an ndarray image is 2 or 3 dims, got {pic.ndim}",
                             op="to_tensor")
        img = (pic[:, :, None] if pic.ndim == 2 else pic).transpose(2, 0, 1)
        return wrap(img.astype(np.float32) / np.float32(255) if img.dtype == np.uint8 else img)
    if not is_pil(pic):
        raise DTypeError(f"to_tensor: pic should be a PIL Image or ndarray, got "
                         f"{type(pic).__name__}", op="to_tensor")
    nptype = {"I": np.int32, "I;16": np.int16, "F": np.float32}.get(pic.mode, np.uint8)
    img = np.array(pic, nptype, copy=True)
    if pic.mode == "1":
        img = 255 * img
    img = img.reshape(pic.size[1], pic.size[0], len(pic.getbands())).transpose(2, 0, 1)
    return wrap(img.astype(np.float32) / np.float32(255) if img.dtype == np.uint8 else img)


def pil_to_tensor(pic) -> Tensor:
    """A PIL image as a [C, H, W] tensor of its own dtype (uint8 for 8-bit modes), unscaled."""
    if not is_pil(pic):
        raise DTypeError(f"pil_to_tensor: pic should be a PIL Image, got {type(pic).__name__}",
                         op="pil_to_tensor")
    img = np.array(pic, copy=True)
    return wrap(img.reshape(pic.size[1], pic.size[0], len(pic.getbands())).transpose(2, 0, 1))


def to_pil_image(pic, mode: str | None = None):
    """A [C, H, W] tensor or HWC ndarray as a PIL image (floats scaled by 255 to uint8)."""
    if is_tensor(pic):
        a = array(pic)
        pic = a.transpose(1, 2, 0) if a.ndim == 3 else a
    elif not isinstance(pic, np.ndarray):
        raise DTypeError(f"to_pil_image: pic should be a Tensor or ndarray, got "
                         f"{type(pic).__name__}", op="to_pil_image")
    if pic.ndim == 2:
        pic = pic[:, :, None]
    if pic.ndim != 3 or pic.shape[-1] > 4:
        raise ShapeError(f"to_pil_image: pic should be 2/3 dimensional with at most 4 channels, "
                         f"got shape {list(pic.shape)}", op="to_pil_image")
    if np.issubdtype(pic.dtype, np.floating) and mode != "F":
        pic = (pic * 255).astype(np.uint8)
    channels = pic.shape[2]
    if channels == 1:
        pic = pic[:, :, 0]
        inferred = {np.dtype(np.uint8): "L", np.dtype(np.int16): "I;16",
                    np.dtype(np.int32): "I", np.dtype(np.float32): "F"}.get(pic.dtype)
        if mode is not None and mode != inferred:
            raise DTypeError(f"to_pil_image: mode {mode} does not fit a 1-channel {pic.dtype} "
                             f"image (it is {inferred})", op="to_pil_image")
        mode = inferred
    elif mode is None and pic.dtype == np.uint8:
        mode = {2: "LA", 3: "RGB", 4: "RGBA"}[channels]
    if mode is None:
        raise DTypeError(f"to_pil_image: input type {pic.dtype} is not supported",
                         op="to_pil_image")
    Image = pil()
    pic = np.ascontiguousarray(pic)
    if mode in ("L", "LA", "RGB", "RGBA", "F", "I"):
        return Image.fromarray(pic)
    # modes NumPy's layout does not name (I;16, YCbCr, HSV, CMYK, RGBX): read the raw bytes
    return Image.frombuffer(mode, (pic.shape[1], pic.shape[0]), pic.tobytes(), "raw", mode, 0, 1)


def convert_image_dtype(image: Tensor, dtype=None) -> Tensor:
    """A tensor image in another dtype, its values rescaled (uint8 255 <-> float 1.0)."""
    a = array(image)
    target = np.dtype(np.float32) if dtype is None else get_dtype(dtype).np
    if a.dtype == target:
        return image
    src_float, dst_float = (np.issubdtype(t, np.floating) for t in (a.dtype, target))
    if src_float and dst_float:
        return wrap(a.astype(target))
    if src_float:  # float -> int: scale by (max + 1 - eps) so that 1.0 lands on max
        return wrap((a * (max_value(target) + 1.0 - 1e-3)).astype(target))
    if dst_float:
        return wrap(a.astype(target) / target.type(max_value(a.dtype)))
    src_max, dst_max = max_value(a.dtype), max_value(target)
    if src_max > dst_max:  # int -> narrower int: drop low bits
        factor = (src_max + 1) // (dst_max + 1)
        return wrap((a // factor).astype(target))
    factor = (dst_max + 1) // (src_max + 1)
    return wrap(a.astype(target) * factor)


# ---- sizes --------------------------------------------------------------------------------
def get_dimensions(img) -> list[int]:
    """[channels, height, width] of a PIL image or tensor."""
    check_image(img, "get_dimensions")
    if is_pil(img):
        return [len(img.getbands()), img.height, img.width]
    shape = list(img.shape)
    return [1 if len(shape) == 2 else shape[-3], shape[-2], shape[-1]]


def get_image_size(img) -> list[int]:
    """[width, height] of a PIL image or tensor."""
    _, h, w = get_dimensions(img)
    return [w, h]


def get_image_num_channels(img) -> int:
    """The number of channels of a PIL image or tensor."""
    return get_dimensions(img)[0]


def _pair(size, op: str) -> list[int]:
    if isinstance(size, numbers.Number):
        return [int(size), int(size)]
    size = list(size)
    if len(size) == 1:
        return [size[0], size[0]]
    if len(size) != 2:
        raise ShapeError(f"{op}: size should be an int or a sequence of 1 or 2 ints, got {size}",
                         op=op)
    return size


# ---- normalize ----------------------------------------------------------------------------
def normalize(tensor: Tensor, mean, std, inplace: bool = False) -> Tensor:
    """(x - mean) / std per channel of a float [..., C, H, W] tensor."""
    check_image(tensor, "normalize")
    if is_pil(tensor) or tensor.ndim < 3:
        raise ShapeError("normalize: expected a tensor image [..., C, H, W]", op="normalize",
                         hint="convert a PIL image with ToTensor() first")
    a = array(tensor)
    if not np.issubdtype(a.dtype, np.floating):
        raise DTypeError(f"normalize: input tensor should be a float tensor, got {tensor.dtype}",
                         op="normalize", hint="ToTensor() or ConvertImageDtype(sf.float32)")
    m = np.asarray(mean, dtype=a.dtype).reshape(-1, 1, 1)
    s = np.asarray(std, dtype=a.dtype).reshape(-1, 1, 1)
    if (s == 0).any():
        raise ShapeError(f"normalize: std evaluated to zero after conversion to {a.dtype}, "
                         "leading to division by zero", op="normalize")
    return wrap((a - m) / s)


# ---- resize -------------------------------------------------------------------------------
def _output_size(h: int, w: int, size, max_size) -> list[int]:
    if isinstance(size, int):
        size = [size]
    size = list(size)
    if len(size) == 2:
        return _positive_size(h, w, [size[0], size[1]])
    if len(size) != 1:
        raise ShapeError(f"resize: size should be an int or 1 or 2 ints, got {size}", op="resize")
    _positive_size(h, w, [size[0], size[0]])
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size[0], int(size[0] * long / short)
    if max_size is not None:
        if max_size <= size[0]:
            raise ShapeError(f"resize: max_size = {max_size} must be strictly greater than the "
                             f"requested size for the smaller edge size = {size}", op="resize")
        if new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    return [new_h, new_w]


def _positive_size(h: int, w: int, out: list[int]) -> list[int]:
    """out, after torch's check that both sizes are positive (a 0 or -1 is a mistake)."""
    if min(h, w, *out) <= 0:
        raise ShapeRuntimeError(
            f"resize: Input and output sizes should be greater than 0, but got input (H: {h}, "
            f"W: {w}) output (H: {out[0]}, W: {out[1]})", op="resize",
            hint="size is the output's (h, w), or its smaller edge: positive ints")
    return out


def _aa_filter(mode: str):
    if mode == "bilinear":
        return 2, lambda x: np.maximum(np.float32(1) - np.abs(x), np.float32(0))

    def cubic(x, a=-0.5):  # Keys' a = -0.5, as torch's and PIL's antialiased bicubic
        x = np.abs(x)
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
        far = (((x - 5) * x + 8) * x - 4) * a
        return np.where(x < 1, near, np.where(x < 2, far, 0)).astype(np.float32)
    return 4, cubic


def _aa_weights(n_in: int, n_out: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """torch's antialiased (PIL's) separable weights: index [n_out, k] and weight [n_out, k]."""
    interp, filt = _aa_filter(mode)
    scale = np.float32(n_in / n_out)
    support = interp * 0.5 * float(scale) if scale >= 1 else interp * 0.5
    invscale = 1.0 / float(scale) if scale >= 1 else 1.0
    center = (float(scale) * (np.arange(n_out) + 0.5)).astype(np.float32).astype(np.float64)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)
    xsize = np.minimum((center + support + 0.5).astype(np.int64), n_in) - xmin
    k = int(math.ceil(support)) * 2 + 1
    j = np.arange(k)
    w = filt(((j[None] + xmin[:, None] - center[:, None] + 0.5) * invscale).astype(np.float32))
    w = np.where(j[None] < xsize[:, None], w, np.float32(0))
    total = w.sum(axis=1, dtype=np.float32, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w).astype(np.float32)
    return np.minimum(xmin[:, None] + j[None], n_in - 1), w


def _linear_weights(n_in: int, n_out: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """torch's interpolate without antialias (align_corners=False): bilinear or bicubic."""
    scale = np.float32(n_in / n_out)
    src = (scale * (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) - np.float32(0.5))
    if mode == "bilinear":
        src = np.maximum(src, 0)
        i0 = src.astype(np.int64)
        lam = src - i0
        idx = np.stack([i0, np.minimum(i0 + 1, n_in - 1)], 1)
        return idx, np.stack([1 - lam, lam], 1).astype(np.float32)
    i0 = np.floor(src).astype(np.int64)
    t = (src - i0).astype(np.float32)
    a = -0.75  # torch's bicubic without antialias

    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    w = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1).astype(np.float32)
    idx = np.clip(i0[:, None] + np.arange(-1, 3)[None], 0, n_in - 1)
    return idx, w


def _nearest_index(n_in: int, n_out: int, exact: bool) -> np.ndarray:
    scale = np.float32(n_in / n_out)
    i = np.arange(n_out, dtype=np.float32)
    src = np.floor((i + np.float32(0.5)) * scale if exact else i * scale)
    return np.minimum(src.astype(np.int64), n_in - 1)


def _resample(a: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray) -> np.ndarray:
    """out[..., i, ...] = sum_j w[i, j] * a[..., idx[i, j], ...], summed in j's order."""
    shape = [1] * a.ndim
    shape[axis] = idx.shape[0]
    out = np.take(a, idx[:, 0], axis=axis) * w[:, 0].reshape(shape)
    for j in range(1, idx.shape[1]):
        out += np.take(a, idx[:, j], axis=axis) * w[:, j].reshape(shape)
    return out


def _resize_array(a: np.ndarray, size: list[int], mode: str, antialias: bool) -> np.ndarray:
    h, w = a.shape[-2:]
    out_dtype = a.dtype
    if mode in ("nearest", "nearest-exact"):
        exact = mode == "nearest-exact"
        return a[..., _nearest_index(h, size[0], exact)[:, None],
                 _nearest_index(w, size[1], exact)[None, :]]
    if mode not in ("bilinear", "bicubic"):
        raise ShapeError(f"resize: tensors support nearest, nearest-exact, bilinear and bicubic "
                         f"interpolation, got {mode}", op="resize",
                         hint="resize a PIL image for box, hamming or lanczos")
    x = a if a.dtype in (np.float32, np.float64) else a.astype(np.float32)
    weights = _aa_weights if antialias else _linear_weights
    if size[1] != w:  # width first, then height: torch's separable order
        x = _resample(x, -1, *(t.astype(x.dtype) if t.dtype.kind == "f" else t
                               for t in weights(w, size[1], mode)))
    if size[0] != h:
        x = _resample(x, -2, *(t.astype(x.dtype) if t.dtype.kind == "f" else t
                               for t in weights(h, size[0], mode)))
    if out_dtype != x.dtype:
        if mode == "bicubic" and out_dtype == np.uint8:
            x = np.clip(x, 0, 255)
        x = np.round(x).astype(out_dtype)
    return x


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size: int | None = None,
           antialias: bool | None = True):
    """Resize to size (h, w), or the smaller edge to size (an int), as torchvision's resize."""
    check_image(img, "resize")
    mode = _mode(interpolation)
    _, h, w = get_dimensions(img)
    out = _output_size(h, w, size, max_size)
    if out == [h, w]:
        return img
    if is_pil(img):
        return img.resize((out[1], out[0]), _PIL_MODES[mode.value])
    return wrap(_resize_array(array(img), out, mode.value, bool(antialias)))


# ---- crops and flips ----------------------------------------------------------------------
def crop(img, top: int, left: int, height: int, width: int):
    """The [top, top + height) x [left, left + width) region; outside the image is zero."""
    check_image(img, "crop")
    if is_pil(img):
        return img.crop((left, top, left + width, top + height))
    a = array(img)
    h, w = a.shape[-2:]
    right, bottom = left + width, top + height
    if left < 0 or top < 0 or right > w or bottom > h:
        pads = [(0, 0)] * (a.ndim - 2) + [(max(-top, 0), max(bottom - h, 0)),
                                          (max(-left, 0), max(right - w, 0))]
        a = np.pad(a[..., max(top, 0):max(bottom, 0), max(left, 0):max(right, 0)], pads)
        return wrap(a)
    return wrap(a[..., top:bottom, left:right])


def center_crop(img, output_size):
    """The centre crop of size (h, w); a smaller image is zero-padded first."""
    check_image(img, "center_crop")
    crop_h, crop_w = _pair(output_size, "center_crop")
    _, h, w = get_dimensions(img)
    if crop_w > w or crop_h > h:
        padding = [(crop_w - w) // 2 if crop_w > w else 0, (crop_h - h) // 2 if crop_h > h else 0,
                   (crop_w - w + 1) // 2 if crop_w > w else 0,
                   (crop_h - h + 1) // 2 if crop_h > h else 0]
        img = pad(img, padding, fill=0)
        _, h, w = get_dimensions(img)
        if crop_w == w and crop_h == h:
            return img
    top = int(round((h - crop_h) / 2.0))
    left = int(round((w - crop_w) / 2.0))
    return crop(img, top, left, crop_h, crop_w)


def resized_crop(img, top: int, left: int, height: int, width: int, size,
                 interpolation=InterpolationMode.BILINEAR, antialias: bool | None = True):
    """crop, then resize to size."""
    return resize(crop(img, top, left, height, width), size, interpolation, antialias=antialias)


def hflip(img):
    """Mirror left to right."""
    check_image(img, "hflip")
    if is_pil(img):
        return img.transpose(pil().Transpose.FLIP_LEFT_RIGHT)
    return wrap(array(img)[..., ::-1])


def vflip(img):
    """Mirror top to bottom."""
    check_image(img, "vflip")
    if is_pil(img):
        return img.transpose(pil().Transpose.FLIP_TOP_BOTTOM)
    return wrap(array(img)[..., ::-1, :])


# ---- padding ------------------------------------------------------------------------------
def _parse_padding(padding) -> list[int]:
    if isinstance(padding, numbers.Number):
        return [int(padding)] * 4
    padding = list(padding)
    if len(padding) == 1:
        return padding * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    if len(padding) == 4:
        return padding
    raise ShapeError(f"pad: padding must be an int or a 1, 2, or 4 element sequence, got "
                     f"{len(padding)} elements", op="pad")


def _pil_fill(fill, img):
    channels = len(img.getbands())
    fill = 0 if fill is None else fill
    if isinstance(fill, (int, float)) and channels > 1:
        fill = (fill,) * channels
    if isinstance(fill, (list, tuple)):
        if len(fill) == 1:
            fill = tuple(fill) * channels
        elif len(fill) != channels:
            raise ShapeError(f"pad: fill has {len(fill)} values for an image of {channels} "
                             "channels", op="pad")
        fill = tuple(fill)
    if img.mode != "F":
        fill = tuple(int(x) for x in fill) if isinstance(fill, tuple) else int(fill)
    return fill


def pad(img, padding, fill=0, padding_mode: str = "constant"):
    """Pad (left, top, right, bottom) with fill, or by edge, reflect or symmetric mode."""
    check_image(img, "pad")
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ShapeError(f"pad: padding_mode should be constant, edge, reflect or symmetric, got "
                         f"{padding_mode!r}", op="pad")
    left, top, right, bottom = _parse_padding(padding)
    if is_pil(img) and padding_mode == "constant" and min(left, top, right, bottom) >= 0:
        from PIL import ImageOps

        palette = img.getpalette() if img.mode == "P" else None
        out = ImageOps.expand(img, border=(left, top, right, bottom), fill=_pil_fill(fill, img))
        if palette is not None:
            out.putpalette(palette)
        return out
    was_pil = is_pil(img)
    a = np.asarray(img) if was_pil else array(img)
    if not was_pil and a.ndim == 2:
        a = a[None]
    # negative padding crops
    h, w = (a.shape[:2] if was_pil else a.shape[-2:])
    ct, cb, cl, cr = (max(-p, 0) for p in (top, bottom, left, right))
    a = a[ct:h - cb, cl:w - cr] if was_pil else a[..., ct:h - cb, cl:w - cr]
    hw = [(max(top, 0), max(bottom, 0)), (max(left, 0), max(right, 0))]
    if was_pil:
        pads = hw + [(0, 0)] * (a.ndim - 2)
    else:
        pads = [(0, 0)] * (a.ndim - 2) + hw
    if padding_mode == "constant":
        if not was_pil and isinstance(fill, (list, tuple)):
            raise DTypeError("pad: a tensor pads with one number, got a sequence for fill",
                             op="pad")
        out = np.pad(a, pads, mode="constant", constant_values=0 if fill is None else fill)
    else:
        out = np.pad(a, pads, mode=padding_mode)
    if was_pil:
        palette = img.getpalette() if img.mode == "P" else None
        image = pil().fromarray(np.ascontiguousarray(out))
        if palette is not None:
            image.putpalette(palette)
        return image
    return wrap(out.reshape(out.shape[1:]) if array(img).ndim == 2 else out)


# ---- colour -------------------------------------------------------------------------------
def _gray(a: np.ndarray) -> np.ndarray:
    """torchvision's luma: 0.2989 r + 0.587 g + 0.114 b in float32, back to a's dtype."""
    r, g, b = (a[..., i, :, :].astype(np.float32) if a.dtype != np.float64 else a[..., i, :, :]
               for i in range(3))
    ft = r.dtype.type
    return (ft(0.2989) * r + ft(0.587) * g + ft(0.114) * b).astype(a.dtype)[..., None, :, :]


def rgb_to_grayscale(img, num_output_channels: int = 1):
    """Luma of an RGB image, 1 or 3 channels (PIL's convert('L') for PIL images)."""
    check_image(img, "rgb_to_grayscale")
    if num_output_channels not in (1, 3):
        raise ShapeError(f"rgb_to_grayscale: num_output_channels should be 1 or 3, got "
                         f"{num_output_channels}", op="rgb_to_grayscale")
    if is_pil(img):
        out = img.convert("L")
        if num_output_channels == 3:
            out = pil().fromarray(np.dstack([np.asarray(out)] * 3), "RGB")
        return out
    a = array(img)
    c = get_dimensions(img)[0]
    if c not in (1, 3):
        raise ShapeError(f"rgb_to_grayscale: input image tensor should have 1 or 3 channels, got "
                         f"{c}", op="rgb_to_grayscale")
    gray = _gray(a) if c == 3 else a.copy()
    if num_output_channels == 3:
        gray = np.broadcast_to(gray, gray.shape[:-3] + (3,) + gray.shape[-2:]).copy()
    return wrap(gray)


def to_grayscale(img, num_output_channels: int = 1):
    """rgb_to_grayscale for PIL images (torchvision's older name)."""
    return rgb_to_grayscale(img, num_output_channels)


def _blend(a: np.ndarray, b: np.ndarray, ratio: float) -> np.ndarray:
    bound = max_value(a.dtype)
    ft = np.float64 if a.dtype == np.float64 else np.float32
    out = ft(ratio) * a.astype(ft) + ft(1.0 - ratio) * b.astype(ft)
    return np.clip(out, 0, bound).astype(a.dtype)


def _check_factor(factor: float, name: str, op: str) -> None:
    if factor < 0:
        raise ShapeError(f"{op}: {name} ({factor}) is not non-negative", op=op)


def adjust_brightness(img, brightness_factor: float):
    """Brightness scaled by the factor (0 black, 1 unchanged)."""
    check_image(img, "adjust_brightness")
    _check_factor(brightness_factor, "brightness_factor", "adjust_brightness")
    if is_pil(img):
        from PIL import ImageEnhance
        return ImageEnhance.Brightness(img).enhance(brightness_factor)
    a = array(img)
    return wrap(_blend(a, np.zeros_like(a), brightness_factor))


def adjust_contrast(img, contrast_factor: float):
    """Contrast scaled by the factor, around the mean luma (0 gray, 1 unchanged)."""
    check_image(img, "adjust_contrast")
    _check_factor(contrast_factor, "contrast_factor", "adjust_contrast")
    if is_pil(img):
        from PIL import ImageEnhance
        return ImageEnhance.Contrast(img).enhance(contrast_factor)
    a = array(img)
    ft = a.dtype if np.issubdtype(a.dtype, np.floating) else np.float32
    base = _gray(a) if get_dimensions(img)[0] == 3 else a
    mean = base.astype(ft).mean(axis=(-3, -2, -1), keepdims=True, dtype=ft)
    return wrap(_blend(a, mean, contrast_factor))


def adjust_saturation(img, saturation_factor: float):
    """Saturation scaled by the factor (0 gray, 1 unchanged)."""
    check_image(img, "adjust_saturation")
    _check_factor(saturation_factor, "saturation_factor", "adjust_saturation")
    if is_pil(img):
        from PIL import ImageEnhance
        return ImageEnhance.Color(img).enhance(saturation_factor)
    a = array(img)
    if get_dimensions(img)[0] == 1:
        return img
    return wrap(_blend(a, _gray(a), saturation_factor))


def _rgb2hsv(img: np.ndarray) -> np.ndarray:
    r, g, b = (img[..., i, :, :] for i in range(3))
    maxc, minc = img.max(axis=-3), img.min(axis=-3)
    eqc = maxc == minc
    cr = maxc - minc
    one = np.ones_like(maxc)
    s = cr / np.where(eqc, one, maxc)
    div = np.where(eqc, one, cr)
    rc, gc, bc = (maxc - r) / div, (maxc - g) / div, (maxc - b) / div
    ft = img.dtype.type
    h = ((maxc == r) * (bc - gc) + ((maxc == g) & (maxc != r)) * (ft(2.0) + rc - bc)
         + ((maxc != g) & (maxc != r)) * (ft(4.0) + gc - rc))
    h = np.fmod(h / ft(6.0) + ft(1.0), ft(1.0))
    return np.stack((h, s, maxc), axis=-3)


def _hsv2rgb(img: np.ndarray) -> np.ndarray:
    h, s, v = (img[..., i, :, :] for i in range(3))
    ft = img.dtype.type
    i = np.floor(h * ft(6.0))
    f = h * ft(6.0) - i
    i = i.astype(np.int32) % 6
    p = np.clip(v * (ft(1.0) - s), 0, 1)
    q = np.clip(v * (ft(1.0) - s * f), 0, 1)
    t = np.clip(v * (ft(1.0) - s * (ft(1.0) - f)), 0, 1)
    table = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = np.zeros(h.shape[:-2] + (3,) + h.shape[-2:], img.dtype)
    for k, (rr, gg, bb) in enumerate(table):
        mask = i == k
        for c, src in enumerate((rr, gg, bb)):
            out[..., c, :, :] = np.where(mask, src, out[..., c, :, :])
    return out


def adjust_hue(img, hue_factor: float):
    """Hue shifted by hue_factor turns (in [-0.5, 0.5])."""
    check_image(img, "adjust_hue")
    if not -0.5 <= hue_factor <= 0.5:
        raise ShapeError(f"adjust_hue: hue_factor ({hue_factor}) is not in [-0.5, 0.5]",
                         op="adjust_hue")
    if is_pil(img):
        if img.mode in {"L", "1", "I", "F"}:
            return img
        Image = pil()
        mode = img.mode
        h, s, v = img.convert("HSV").split()
        np_h = np.array(h, dtype=np.uint8)
        with np.errstate(over="ignore"):  # wraps around the hue circle, as intended
            np_h += np.array(np.int32(hue_factor * 255)).astype(np.uint8)
        return Image.merge("HSV", (Image.fromarray(np_h, "L"), s, v)).convert(mode)
    a = array(img)
    if get_dimensions(img)[0] == 1:
        return img
    x = a.astype(np.float32) / np.float32(max_value(a.dtype)) if a.dtype.kind != "f" else a
    hsv = _rgb2hsv(x)
    hsv[..., 0, :, :] = np.mod(hsv[..., 0, :, :] + hsv.dtype.type(hue_factor), 1.0)
    rgb = _hsv2rgb(hsv)
    if a.dtype.kind != "f":
        rgb = (rgb * (max_value(a.dtype) + 1.0 - 1e-3)).astype(a.dtype)
    return wrap(rgb)


__all__ = [
    "InterpolationMode", "adjust_brightness", "adjust_contrast", "adjust_hue",
    "adjust_saturation", "center_crop", "convert_image_dtype", "crop", "get_dimensions",
    "get_image_num_channels", "get_image_size", "hflip", "normalize", "pad", "pil_to_tensor",
    "resize", "resized_crop", "rgb_to_grayscale", "to_grayscale", "to_pil_image", "to_tensor",
    "vflip",
]
