"""shapeflow: tensors, shapes as contracts, and the computation graph as the training link."""

from __future__ import annotations

from . import _methods  # noqa: F401  (attaches op methods to Tensor)
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .device import Device, cpu, get_default_device, set_default_device
from .device import get_device as device
from .dtypes import (
    DType, bfloat16, float16, float32, float64, get_default_dtype, get_dtype, int8, int16, int32,
    int64, promote_types, result_type, set_default_dtype, uint8, uint16, uint32, uint64,
)
from .dtypes import bool_ as bool  # noqa: A001  (PyTorch's name: sf.bool)
from .dtypes import complex64, complex128
from .errors import (
    CheckpointError, DeviceError, DTypeError, ExportError, GraphError, ShapeError, ShapeflowError,
)
from .factories import (
    arange, empty, empty_like, eye, full, full_like, linspace, ones, ones_like, rand, rand_like,
    randint, randn, randn_like, randperm, zeros, zeros_like,
)
from .factories import layout, strided
# sf.<op>: every op function declared @public (ops/registry.py), where its module says
from .ops import registry as _registry

globals().update(_registry.namespace("sf"))
from .io import load, save
from . import fft  # sf.fft.<transform>, as torch.fft (a module: `import shapeflow.fft`)
from .random import Generator, initial_seed, manual_seed, seed
from .recompute import checkpoint
from .dlpack import from_dlpack
from .autograd import function as _function, functional as _functional  # noqa: F401
from .shape import Shape
from .symbolic import Dim, dims
from .inspect.anomaly import AnomalyError, detect_anomaly
from .inspect.contracts import check, shapes
from .inspect.explain import explain_no_grad
from .backend.cpu.threads import (get_num_interop_threads, get_num_threads,
                              set_num_interop_threads, set_num_threads)
from .inspect.summary import summary
from .tensor import Tensor, as_tensor, from_numpy, tensor
from .special import i0, polygamma
from .special import gammainc as igamma, gammaincc as igammac, multigammaln as mvlgamma
from .amp.autocast_mode import (
    autocast, clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_dtype,
    is_autocast_cache_enabled, is_autocast_cpu_enabled, is_autocast_enabled,
    set_autocast_cache_enabled, set_autocast_dtype, set_autocast_enabled,
)

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

__version__ = "0.1.0"

# Large NumPy buffers are reused instead of faulted in afresh (backend/cpu/buffers.py);
# SHAPEFLOW_BUFFER_CACHE=0 keeps NumPy's own allocator.
from .backend.cpu import buffers as _buffers

_buffers.enable()

_LAZY = {
    "nn": ".nn", "optim": ".optim", "data": ".data", "models": ".models", "autograd": ".autograd",
    "memory": ".inspect.memory", "onnx": ".io.onnx", "linalg": ".linalg",
    "distributed": ".distributed", "cuda": ".cuda", "backends": ".backends",
    "accelerator": ".accelerator", "compat": ".compat",
    "utils": ".utils", "distributions": ".distributions", "quant": ".quant", "amp": ".amp",
    "serialization": ".serialization",
    "special": ".special", "serve": ".serve", "signal": ".signal", "compiler": ".compiler",
    "_dynamo": ".compiler",  # torch._dynamo.mark_dynamic / reset / explain, ported as written
}
_LAZY_ATTRS = {"graph": ".inspect.graph", "Graph": ".inspect.graph"}  # subprocess: not at import
_LAZY_ATTRS["compile"] = ".compiler"  # sf.compile (torch.compile's counterpart)
_LAZY_ATTRS["GradScaler"] = ".amp.grad_scaler"  # (torch.GradScaler) first used, then imported
_LAZY_ATTRS.update(dict.fromkeys(
    ("set_float32_matmul_precision", "get_float32_matmul_precision"), ".backends"))
_LAZY_ATTRS.update(dict.fromkeys(("hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"), ".signal.windows"))
_LAZY_ATTRS.update(dict.fromkeys(("memory_format", "preserve_format", "contiguous_format",
                                  "channels_last", "channels_last_3d"), ".tensor_compat"))

# torch.autograd.Function's home (autograd/function.py sits above ops; the package below)
_function.install()

# Tensor refuses torch functions and says what to use for torch.Tensor names it lacks
from . import _porting

_porting.attach(globals())

# a line of help for the functions defined without one (PyTorch's _torch_docs.py, in small)
from . import _docs

_docs.apply(globals())

# einops learns of shapeflow tensors when einops is imported (nothing is imported here)
from .ext import install as _install_ext

_install_ext()


def __getattr__(name: str):
    import importlib

    if name in _LAZY:
        return importlib.import_module(_LAZY[name], __name__)
    if name in _LAZY_ATTRS:
        return getattr(importlib.import_module(_LAZY_ATTRS[name], __name__), name)
    from ._porting import missing_attribute  # says what to use for a name PyTorch has

    raise missing_attribute("module 'shapeflow'", "torch", name)
