"""QuantizedTensor: low-precision data with its scales (and zero points), and quantize_tensor.

Values are q = clamp(round_half_even(x / scale) + zero_point, qmin, qmax); dequantized,
(q - zero_point) * scale in float32, which is exact (an integer of at most 8 bits times a
float32 scale rounds once). Symmetric integer types use the range [-Q, Q] (int8: +-127,
int4: +-7), so -q is always representable; uint8 symmetric keeps its zero point fixed at
128. Asymmetric types use the full range and store a zero point per scale. fp8 is symmetric
only: x / scale is clamped to the format's largest finite value and rounded by ml_dtypes.
Per-group int4 stores float16 scales (as llama.cpp's Q4_0: 4.5 bits a weight at group 32)
and quantizes against the rounded scale, so dequantizing with the scale widened to float32
stays exact; every other format keeps float32 scales.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import DTypeError, ShapeError, ShapeflowError
from ..tensor import Tensor, from_numpy


class QuantError(ShapeflowError, ValueError):
    """A value or setting that quantization cannot take (NaN weights, an unknown scheme)."""

    kind = "QuantError"


@dataclass(frozen=True)
class QDType:
    """One storage format: its NumPy type, range and whether it is an integer type."""

    name: str
    np: type  # what qdata holds (int4: uint8, two values a byte)
    qmin: float
    qmax: float
    integer: bool = True
    bits: int = 8


QDTYPES: dict[str, QDType] = {
    "int8": QDType("int8", np.int8, -128, 127),
    "uint8": QDType("uint8", np.uint8, 0, 255),
    "int4": QDType("int4", np.uint8, -8, 7, bits=4),
    "fp8-e4m3": QDType("fp8-e4m3", ml_dtypes.float8_e4m3fn, -448.0, 448.0, integer=False),
    "fp8-e5m2": QDType("fp8-e5m2", ml_dtypes.float8_e5m2, -57344.0, 57344.0, integer=False),
}


def scale_dtype(qdtype: str, group_size: int | None) -> type:
    """The NumPy type scales are stored in: float16 for per-group int4, else float32."""
    return np.float16 if qdtype == "int4" and group_size is not None else np.float32


_F16 = np.finfo(np.float16)


def _round_scale(scale: np.ndarray, dtype: type) -> np.ndarray:
    """float64 scales as stored: 0 (an all-zero slice) -> 1; in float16, a scale below the
    smallest normal -> that normal (a subnormal keeps too few bits) and one past the largest
    finite -> it; the values are then clamped to the range as usual."""
    scale = np.array(scale, np.float64)
    zero = scale == 0
    if dtype is np.float16:
        scale = np.clip(scale, float(_F16.smallest_normal), float(_F16.max))
    out = np.array(scale, dtype)
    out[zero | (out == 0)] = 1.0  # an all-zero slice: any scale stores it exactly
    return out


def get_qdtype(name: str, what: str = "quantize_tensor") -> QDType:
    """The QDType called `name`, or a DTypeError listing the known ones."""
    try:
        return QDTYPES[name]
    except (KeyError, TypeError):
        raise DTypeError(f"{what}: unknown qdtype {name!r}", op="quantize",
                         hint=f"one of {', '.join(QDTYPES)}") from None


# ---- int4 packing -------------------------------------------------------------------------
def pack_int4(q: np.ndarray) -> np.ndarray:
    """Signed 4-bit values (int8 in [-8, 7]) two per byte along the last dim: element 2i in
    the low nibble, 2i+1 in the high one; an odd last dim is padded with a zero."""
    if q.shape[-1] % 2:
        q = np.concatenate([q, np.zeros((*q.shape[:-1], 1), q.dtype)], axis=-1)
    u = q.view(np.uint8) & np.uint8(0x0F)
    return u[..., 0::2] | (u[..., 1::2] << np.uint8(4))


def unpack_int4(packed: np.ndarray, n: int) -> np.ndarray:
    """The int8 values pack_int4 stored, the last dim cut back to n."""
    out = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), np.uint8)
    out[..., 0::2] = packed & np.uint8(0x0F)
    out[..., 1::2] = packed >> np.uint8(4)
    # sign-extend the nibble: (v ^ 8) - 8
    return ((out ^ np.uint8(8)).view(np.int8) - np.int8(8))[..., :n]


# ---- the tensor ---------------------------------------------------------------------------
class QuantizedTensor:
    """Low-precision data (`qdata`), `scale` (float16 for per-group int4, else float32),
    `zero_point` (None when symmetric and signed), `qdtype`, `axis` (per-channel dim; None
    per tensor), `group_size` (groups along the last dim) and the logical `shape`."""

    __slots__ = ("qdata", "scale", "zero_point", "qdtype", "axis", "group_size", "shape",
                 "symmetric")

    def __init__(self, qdata: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None,
                 qdtype: str, shape: tuple, axis: int | None = None,
                 group_size: int | None = None, symmetric: bool | None = None) -> None:
        self.qdata, self.scale, self.zero_point = qdata, scale, zero_point
        self.qdtype, self.shape = qdtype, tuple(shape)
        self.axis, self.group_size = axis, group_size
        self.symmetric = (zero_point is None or qdtype == "uint8") if symmetric is None \
            else symmetric

    @property
    def nbytes(self) -> int:
        """Bytes held: data + scales + zero points."""
        zp = 0 if self.zero_point is None else self.zero_point.nbytes
        return int(self.qdata.nbytes + self.scale.nbytes + zp)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def int_repr(self) -> np.ndarray:
        """The stored values at the logical shape: int8 (int4 unpacked), uint8, or fp8."""
        if self.qdtype == "int4":
            return unpack_int4(self.qdata, self.shape[-1])
        return self.qdata

    def _broadcast(self, a: np.ndarray) -> np.ndarray:
        """A per-tensor, per-channel or per-group array shaped to broadcast over the values
        (per group: over the values reshaped to [..., groups, group_size])."""
        if self.group_size is not None:
            return a[..., None]
        if self.axis is not None:
            shape = [1] * len(self.shape)
            shape[self.axis] = -1
            return a.reshape(shape)
        return a

    def dequantize_numpy(self) -> np.ndarray:
        """(q - zero_point) * scale as a float32 array of the logical shape."""
        q = self.int_repr()
        if self.group_size is not None:
            q = q.reshape(*self.shape[:-1], self.shape[-1] // self.group_size, self.group_size)
        v = q.astype(np.float32)
        if self.zero_point is not None:
            v -= self._broadcast(self.zero_point).astype(np.float32)
        v *= self._broadcast(self.scale.astype(np.float32))  # float16 widens exactly
        return v.reshape(self.shape)

    def dequantize(self) -> Tensor:
        """The float32 Tensor the stored values stand for."""
        return from_numpy(self.dequantize_numpy())

    def rows(self, index: np.ndarray) -> QuantizedTensor:
        """The rows `index` (1-D) of a 2-D tensor quantized per tensor, per row or per group."""
        index = np.asarray(index).reshape(-1)
        if self.axis not in (None, 0) and self.group_size is None:
            raise ShapeError("QuantizedTensor.rows: the scales run along dim 1, not per row",
                             op="quantize")
        per_row = self.axis == 0 or self.group_size is not None
        take = (lambda a: a[index]) if per_row else (lambda a: a)
        return QuantizedTensor(self.qdata[index], take(self.scale),
                               None if self.zero_point is None else take(self.zero_point),
                               self.qdtype, (len(index), *self.shape[1:]), self.axis,
                               self.group_size, self.symmetric)

    def __repr__(self) -> str:
        gran = (f"group_size={self.group_size}" if self.group_size is not None else
                f"axis={self.axis}" if self.axis is not None else "per tensor")
        sym = "symmetric" if self.symmetric else "asymmetric"
        return (f"QuantizedTensor({list(self.shape)}, {self.qdtype}, {gran}, {sym}, "
                f"{self.nbytes} bytes)")


# ---- quantize -----------------------------------------------------------------------------
def _as_array(x) -> np.ndarray:
    if isinstance(x, Tensor):
        if x._data is None:
            raise ShapeflowError(f"quantize_tensor: a {x.device} tensor has no values",
                                 op="quantize", hint="quantize tensors on cpu")
        return np.asarray(x._data)
    return np.asarray(x)


def _reduce(x: np.ndarray, fn, axis: int | None, group_size: int | None) -> np.ndarray:
    """fn over each scale's slice: the whole tensor, all dims but `axis`, or each group."""
    if group_size is not None:
        return fn(x.reshape(*x.shape[:-1], x.shape[-1] // group_size, group_size), axis=-1)
    if axis is not None:
        return fn(np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1), axis=1)
    return np.asarray(fn(x))


def quantize_tensor(x, qdtype: str = "int8", *, axis: int | None = None,
                    group_size: int | None = None, symmetric: bool = True,
                    calibration_max=None, name: str | None = None) -> QuantizedTensor:
    """Quantize `x` to `qdtype` per tensor, per channel (`axis`) or per group (`group_size`
    along the last dim); round half to even, clamp at the range. `calibration_max` replaces
    the observed max |x| (scalar, or one per scale) to clip outliers. `name` goes in errors.
    """
    what = f"quantize_tensor({name})" if name else "quantize_tensor"
    spec = get_qdtype(qdtype, what)
    arr = _as_array(x)
    if arr.dtype.kind != "f" and arr.dtype not in (ml_dtypes.bfloat16,):
        raise DTypeError(f"{what}: expected floating-point values, got {arr.dtype}",
                         op="quantize")
    x64 = arr.astype(np.float64)
    shape = x64.shape
    if axis is not None and group_size is not None:
        raise QuantError(f"{what}: give axis or group_size, not both (groups run along the "
                         "last dim, one set per row)", op="quantize")
    if axis is not None:
        if not -x64.ndim <= axis < max(x64.ndim, 1) or x64.ndim == 0:
            raise ShapeError(f"{what}: axis {axis} is out of range for a {x64.ndim}-d tensor "
                             f"{list(shape)}", op="quantize")
        axis %= x64.ndim
    if group_size is not None and (type(group_size) is not int or group_size <= 0
                                   or x64.ndim == 0 or shape[-1] % group_size):
            last = shape[-1] if x64.ndim else "none"
            raise ShapeError(f"{what}: group_size {group_size} does not divide the last dim "
                             f"({last}) of {list(shape)}: each group of group_size values "
                             "along the last dim shares one scale", op="quantize",
                             hint="pick a group size that divides it, or quantize per channel")
    if qdtype == "int4" and x64.ndim == 0:
        raise ShapeError(f"{what}: int4 packs two values a byte along the last dim; a 0-d "
                         "tensor has none", op="quantize", hint="reshape it to [1]")
    if not spec.integer and not symmetric:
        raise QuantError(f"{what}: {qdtype} is symmetric only (a float format has no zero "
                         "point)", op="quantize", hint="pass symmetric=True")
    bad = ~np.isfinite(x64)
    if bad.any():
        n = int(bad.sum())
        raise QuantError(f"{what}: the tensor holds {n} NaN/Inf value(s) (first at index "
                         f"{tuple(int(i) for i in np.argwhere(bad)[0])}); a scale must come "
                         "from finite values", op="quantize",
                         hint="check the weights or inputs for overflow before quantizing")

    if symmetric:
        amax = _reduce(np.abs(x64), np.max, axis, group_size) if x64.size else np.zeros(())
        if calibration_max is not None:
            amax = np.broadcast_to(np.asarray(calibration_max, np.float64), amax.shape)
        levels = spec.qmax if not spec.integer else min(-spec.qmin, spec.qmax)
        if qdtype == "uint8":
            levels = 127.0
        scale = _round_scale(amax / levels, scale_dtype(qdtype, group_size))
        zero = np.full(scale.shape, 128, np.uint8) if qdtype == "uint8" else None
        lo, hi = (1, 255) if qdtype == "uint8" else (-levels, levels)
    else:
        xmin = _reduce(x64, np.min, axis, group_size) if x64.size else np.zeros(())
        xmax = _reduce(x64, np.max, axis, group_size) if x64.size else np.zeros(())
        if calibration_max is not None:
            c = np.asarray(calibration_max, np.float64)
            xmin, xmax = np.maximum(xmin, -c), np.minimum(xmax, c)
        xmin, xmax = np.minimum(xmin, 0.0), np.maximum(xmax, 0.0)  # zero stays exact
        scale = _round_scale((xmax - xmin) / (spec.qmax - spec.qmin),
                             scale_dtype(qdtype, group_size))
        zp = np.clip(np.rint(spec.qmin - xmin / scale.astype(np.float64)), spec.qmin, spec.qmax)
        zero = np.array(zp, np.uint8 if qdtype == "uint8" else np.int8)
        lo, hi = spec.qmin, spec.qmax

    qt = QuantizedTensor(np.empty(0, np.uint8), scale, zero, qdtype, shape, axis, group_size,
                         symmetric)
    v = x64 if group_size is None else x64.reshape(*shape[:-1], -1, group_size)
    v = v / qt._broadcast(scale.astype(np.float64))
    if spec.integer:
        q = np.rint(v)
        if zero is not None:
            q += qt._broadcast(zero.astype(np.float64))
        q = np.clip(q, lo, hi).reshape(shape)
        if qdtype == "int4":
            qt.qdata = np.ascontiguousarray(pack_int4(q.astype(np.int8)))
        else:
            qt.qdata = np.ascontiguousarray(q.astype(spec.np))
    else:
        qt.qdata = np.ascontiguousarray(np.clip(v, lo, hi).reshape(shape).astype(spec.np))
    return qt
