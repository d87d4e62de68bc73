"""`sf.backends`: PyTorch's backend switches, as flags that change nothing here.

`torch.backends.cuda.matmul.allow_tf32 = True` and kin tune GPU kernels shapeflow does not
have; they are kept (so code that sets and reads them runs) and have no effect. The
`is_available()` answers are true ones: no cudnn, no mps; mkl when 2-D float products go to
Intel MKL (`pip install shapeflow[mkl]`, see backend/cpu/gemm.py). Each is a module, as
PyTorch's: `import shapeflow.backends.cudnn as cudnn` then `cudnn.benchmark = True`.
"""

from __future__ import annotations

from . import cpu, cuda, cudnn, mkl, mps

__all__ = ["cpu", "cuda", "cudnn", "get_float32_matmul_precision", "mkl", "mps",
           "set_float32_matmul_precision"]

_precision = {"value": "highest"}


def set_float32_matmul_precision(precision: str) -> None:
    """As torch's: 'highest', 'high' or 'medium'. shapeflow's float32 products are always
    computed in float32, so this is recorded and changes nothing."""
    if precision not in ("highest", "high", "medium"):
        raise ValueError(f"invalid precision {precision!r}: expected 'highest', 'high' or "
                         "'medium'")
    _precision["value"] = precision


def get_float32_matmul_precision() -> str:
    return _precision["value"]


def __getattr__(name: str):
    from .._porting import missing_attribute

    raise missing_attribute("module 'shapeflow.backends'", "torch.backends", name)
