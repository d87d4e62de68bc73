"""Quantization (`sf.quant`): int8 / int4 / fp8 tensors with their scales, quantized
Linear and Embedding modules, exact int8 products, and quantized checkpoints."""

from .checkpoint import load, quant_config, save
from .convert import eligible, quantize
from .metrics import cosine_similarity, normalized_l2, sqnr
from .modules import QuantizedEmbedding, QuantizedLinear
from .onnx_qdq import install as _install_onnx_export
from .qtensor import QDTYPES, QuantError, QuantizedTensor, pack_int4, quantize_tensor, unpack_int4
from .report import QuantReport, Suggestion, report
from .schemes import SCHEMES, Scheme, get_scheme

_install_onnx_export()  # sf.onnx.export writes quantized models as QDQ pairs

__all__ = ["QuantizedTensor", "quantize_tensor", "quantize", "QuantizedLinear",
           "QuantizedEmbedding", "SCHEMES", "Scheme", "get_scheme", "QDTYPES", "QuantError",
           "eligible", "save", "load", "quant_config", "pack_int4", "unpack_int4",
           "sqnr", "normalized_l2", "cosine_similarity", "report", "QuantReport", "Suggestion"]
