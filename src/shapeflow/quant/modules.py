"""QuantizedLinear and QuantizedEmbedding: modules whose weights are stored quantized.

The quantized storage is registered as buffers (`weight_qdata`, `weight_scale`, and
`input_scale` where fp8 activations were calibrated), so state dicts, `sf.save`,
`Module.to("meta")` and the memory report see exactly the bytes held; `weight_q` is a
QuantizedTensor view of them. fp8 data is kept as its uint8 bit pattern (shapeflow has no
fp8 dtype) and viewed as ml_dtypes' type to compute. Tied weights (GPT's wte / lm_head)
quantized in the same format share one set of buffers.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..autograd import no_grad
from ..backend.cpu import igemm
from ..device import cpu
from ..errors import DeviceError, DTypeError, ShapeError, ShapeIndexError
from ..nn.module import Module
from ..nn.parameter import Parameter
from ..ops.base import Op, apply
from ..shape import dims_equal
from ..tensor import Tensor, describe, from_numpy
from .qtensor import QDTYPES, QuantError, QuantizedTensor, quantize_tensor, scale_dtype
from .schemes import Scheme, get_scheme

_FP8_MAX = {"fp8-e4m3": 448.0}


def _layout(scheme: Scheme, shape: tuple[int, int]) -> tuple[tuple, type, tuple]:
    """(qdata shape, qdata NumPy dtype as stored, scale shape) of a [rows, cols] weight."""
    rows, cols = shape
    if scheme.weight == "int4":
        qshape, qnp = (rows, (cols + 1) // 2), np.uint8
    else:
        qshape, qnp = (rows, cols), (np.int8 if scheme.weight == "int8" else np.uint8)
    if scheme.group_size is not None:
        sshape = (rows, cols // scheme.group_size)
    elif scheme.axis is not None:
        sshape = (shape[scheme.axis],)
    else:
        sshape = ()
    return qshape, qnp, sshape


def _stored(a: np.ndarray) -> np.ndarray:
    """qdata as a buffer holds it: fp8 as its uint8 bits."""
    return a if a.dtype in (np.int8, np.uint8) else a.view(np.uint8)


class _QuantizedWeight(Module):
    """The buffers of one quantized [rows, cols] weight and the QuantizedTensor they form."""

    _weight_shape: tuple[int, int] = (0, 0)

    def _init_storage(self, scheme: Scheme, shape: tuple[int, int]) -> None:
        self.scheme = scheme.name
        self._weight_shape = shape
        qshape, qnp, sshape = _layout(scheme, shape)
        self.register_buffer("weight_qdata", from_numpy(np.zeros(qshape, qnp)))
        self.register_buffer("weight_scale", from_numpy(
            np.ones(sshape, scale_dtype(scheme.weight, scheme.group_size))))

    def _set_weight(self, w: Tensor, name: str | None, memo: dict | None) -> None:
        """Quantize the float weight `w` into the buffers (shared with a tied copy)."""
        scheme = get_scheme(self.scheme)
        key = (id(w), scheme.name)
        if memo is not None and key in memo:
            self.weight_qdata, self.weight_scale = memo[key]
            return
        qt = quantize_tensor(w, **scheme.weight_kwargs(), name=name)
        self.weight_qdata = from_numpy(_stored(qt.qdata))
        self.weight_scale = from_numpy(qt.scale)
        if memo is not None:
            memo[key] = (self.weight_qdata, self.weight_scale)

    @property
    def weight_q(self) -> QuantizedTensor:
        """The stored weight as a QuantizedTensor (a view of the buffers, no copy)."""
        scheme = get_scheme(self.scheme)
        data = self.weight_qdata._data
        if data is None:
            raise DeviceError(f"{type(self).__name__}.weight_q: the "
                              f"{self.weight_qdata.device} buffers hold no values",
                              op="quantize", hint="read weight_q of a model on cpu")
        spec = QDTYPES[scheme.weight]
        if not spec.integer:
            data = data.view(spec.np)
        scale = np.ascontiguousarray(self.weight_scale._data,
                                     scale_dtype(scheme.weight, scheme.group_size))
        return QuantizedTensor(data, scale, None, scheme.weight,
                               self._weight_shape, scheme.axis, scheme.group_size, True)

    def _scale(self) -> np.ndarray:
        """The weight's scales widened to float32 for computing (exact from float16; also
        undoes a Module.to(dtype), which casts float buffers too)."""
        return np.ascontiguousarray(self.weight_scale._data, np.float32)

    def weight_nbytes(self) -> int:
        """Bytes of the quantized weight: data + scales (+ zero points)."""
        return int(self.weight_qdata.nbytes + self.weight_scale.nbytes)


class QuantizedLinear(_QuantizedWeight):
    """y = x W^T + b with W stored quantized; no gradient (inference only)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 scheme: str | Scheme = "int8", *, static_input: bool = False) -> None:
        super().__init__()
        s = get_scheme(scheme)
        self.in_features, self.out_features = in_features, out_features
        self._init_storage(s, (out_features, in_features))
        if static_input:
            if s.activations != "fp8-e4m3":
                raise QuantError(f"QuantizedLinear: scheme {s.name!r} has no static input "
                                 "scale (only fp8-e4m3 calibrates one)", op="quantize")
            self.register_buffer("input_scale", from_numpy(np.ones((), np.float32)))
        self.bias = Parameter(from_numpy(np.zeros(out_features, np.float32)),
                              requires_grad=False) if bias else None
        self._correction = (None, None)

    @classmethod
    def from_float(cls, linear, scheme: str | Scheme, *, input_scale: float | None = None,
                   name: str | None = None, memo: dict | None = None) -> QuantizedLinear:
        """The quantized copy of a float `nn.Linear` (input_scale: fp8's calibrated scale)."""
        s = get_scheme(scheme)
        q = cls(linear.in_features, linear.out_features, linear.bias is not None, s,
                static_input=input_scale is not None)
        q._set_weight(linear.weight, f"{name}.weight" if name else "weight", memo)
        if linear.bias is not None:
            q.bias = Parameter(from_numpy(np.array(linear.bias._data, np.float32)),
                               requires_grad=False)
        if input_scale is not None:
            q.input_scale = from_numpy(np.array(input_scale, np.float32))
        return q

    def quant_config(self) -> dict:
        """What rebuilds this module's structure (saved with quantized state dicts)."""
        return {"kind": "linear", "scheme": self.scheme, "in_features": self.in_features,
                "out_features": self.out_features, "bias": self.bias is not None,
                "static_input": "input_scale" in self._buffers}

    @classmethod
    def from_config(cls, config: dict) -> QuantizedLinear:
        return cls(config["in_features"], config["out_features"], config["bias"],
                   config["scheme"], static_input=config["static_input"])

    def forward(self, input):
        with no_grad():
            return apply(_QLinear(self), input)

    def _int8_correction(self, w: np.ndarray) -> np.ndarray:
        """igemm's weight correction, cached while the weight buffer is unchanged."""
        key = (id(w), self.weight_qdata._version[0])
        if self._correction[0] != key:
            self._correction = (key, igemm.weight_correction(w))
        return self._correction[1]

    def _compute(self, x: np.ndarray) -> np.ndarray:
        scheme = get_scheme(self.scheme)
        k, n = self.in_features, self.out_features
        xf = x.reshape(-1, k).astype(np.float32, copy=False)
        bias = None if self.bias is None else np.asarray(self.bias._data, np.float32)
        if scheme.activations == "int8":
            w = self.weight_qdata._data
            xf = np.ascontiguousarray(xf)
            fused = igemm.linear_int8(xf, w, self._scale(), bias)
            if fused is not None:  # qgemm.c: the same steps as below, in one pass
                return fused.reshape(*x.shape[:-1], n).astype(x.dtype, copy=False)
            amax = np.max(np.abs(xf), axis=1) if k else np.zeros(len(xf), np.float32)
            s = (amax / np.float32(127)).astype(np.float32)
            s[s == 0] = 1.0
            bad = ~np.isfinite(s)
            if bad.any():  # a token with inf/NaN: its outputs are NaN (as in qgemm.c)
                s[bad] = np.nan
                xf = np.where(bad[:, None], np.float32(0), xf)
            xq = np.clip(np.rint(xf / s[:, None]), -127, 127).astype(np.int8)
            y = igemm.int8_matmul(xq, w, self._int8_correction(w)).astype(np.float32)
            y *= s[:, None]
            y *= self._scale()
        elif scheme.activations == "fp8-e4m3":
            fp8, top = QDTYPES["fp8-e4m3"].np, _FP8_MAX["fp8-e4m3"]
            if "input_scale" in self._buffers:
                s_in = np.float32(self.input_scale._data)
            else:  # no calibration: the scale of this call's max |x|
                amax = np.float32(np.max(np.abs(xf))) if xf.size else np.float32(0)
                s_in = np.float32(np.float64(amax) / top) if amax > 0 else np.float32(1)
            xq = np.clip(xf / s_in, -top, top).astype(fp8).astype(np.float32)
            wq = self.weight_qdata._data.view(fp8).astype(np.float32)
            y = cpu.kernels.matmul(xq, wq.T)
            y *= np.float32(np.float64(s_in) * np.float64(self._scale()))
        else:
            y = cpu.kernels.matmul(xf, self._dequantized_weight(scheme).T)
        if bias is not None:
            y += bias
        return y.reshape(*x.shape[:-1], n).astype(x.dtype, copy=False)

    def _dequantized_weight(self, scheme: Scheme) -> np.ndarray:
        """The float32 weight for a weight-only product: qgemm.c's one pass, else NumPy's."""
        spec = QDTYPES[scheme.weight]
        if spec.integer:
            k = self.in_features
            w = igemm.dequantize_weight(self.weight_qdata._data, spec.bits, self._weight_shape,
                                        scheme.group_size or k, self._scale())
            if w is not None:
                return w
        return self.weight_q.dequantize_numpy()

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, scheme={self.scheme!r}")


class _QLinear(Op):
    name = "quantized_linear"
    differentiable = False

    def __init__(self, module: QuantizedLinear) -> None:
        self.module = module

    def infer(self, x):
        m = self.module
        if not x.dtype.is_floating_point:
            raise DTypeError(f"quantized_linear: expected a floating-point input, got "
                             f"{x.dtype}", op=self.name, operands=[("input", describe(x))])
        if x.ndim == 0 or dims_equal(x.shape[-1], m.in_features) is False:
            raise ShapeError(
                f"quantized_linear: the input's last dim must be in_features="
                f"{m.in_features}", op=self.name, operands=[("input", describe(x))],
                hint=f"the layer maps {m.in_features} -> {m.out_features} features")
        return (*x.shape[:-1], m.out_features), x.dtype

    def forward(self, x):
        return self.module._compute(x)


class QuantizedEmbedding(_QuantizedWeight):
    """weight[ids] with the table stored quantized: only the rows looked up are dequantized."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, scheme: str | Scheme = "int8-weight") -> None:
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self._init_storage(get_scheme(scheme), (num_embeddings, embedding_dim))

    @classmethod
    def from_float(cls, embedding, scheme: str | Scheme, *, name: str | None = None,
                   memo: dict | None = None) -> QuantizedEmbedding:
        """The quantized copy of a float `nn.Embedding`."""
        q = cls(embedding.num_embeddings, embedding.embedding_dim, embedding.padding_idx,
                scheme)
        q._set_weight(embedding.weight, f"{name}.weight" if name else "weight", memo)
        return q

    def quant_config(self) -> dict:
        return {"kind": "embedding", "scheme": self.scheme,
                "num_embeddings": self.num_embeddings, "embedding_dim": self.embedding_dim,
                "padding_idx": self.padding_idx}

    @classmethod
    def from_config(cls, config: dict) -> QuantizedEmbedding:
        return cls(config["num_embeddings"], config["embedding_dim"], config["padding_idx"],
                   config["scheme"])

    def forward(self, input):
        with no_grad():
            return apply(_QEmbedding(self), input)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, scheme={self.scheme!r}"


class _QEmbedding(Op):
    name = "quantized_embedding"
    differentiable = False

    def __init__(self, module: QuantizedEmbedding) -> None:
        self.module = module

    def infer(self, idx):
        if idx.dtype.is_floating_point or idx.dtype.name == "bool":
            raise DTypeError("quantized_embedding: expected integer ids, got "
                             f"{idx.dtype}", op=self.name, operands=[("input", describe(idx))])
        return (*idx.shape, self.module.embedding_dim), _dt.float32

    def forward(self, idx):
        m = self.module
        if idx.size and (idx.min() < 0 or idx.max() >= m.num_embeddings):
            bad = idx[(idx < 0) | (idx >= m.num_embeddings)].flat[0]
            raise ShapeIndexError(f"quantized_embedding: id {int(bad)} is out of range for "
                                  f"{m.num_embeddings} embeddings", op=self.name)
        return m.weight_q.rows(idx).dequantize_numpy().reshape(*idx.shape, m.embedding_dim)
