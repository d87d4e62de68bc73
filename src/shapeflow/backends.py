"""`sf.backends`: PyTorch's backend switches, as flags that change nothing here.

`torch.backends.cuda.matmul.allow_tf32 = True` and kin tune GPU kernels shapeflow does not
have; they are kept (so code that sets and reads them runs) and have no effect. The
`is_available()` answers are true ones: no cudnn, no mps; mkl when 2-D float products go to
Intel MKL (`pip install shapeflow[mkl]`, see backend/gemm.py).
"""

from __future__ import annotations

__all__ = ["cpu", "cuda", "cudnn", "get_float32_matmul_precision", "mkl", "mps",
           "set_float32_matmul_precision"]


class _Flags:
    """A namespace of settable flags (its class attributes are the defaults)."""

    def __repr__(self) -> str:
        return f"<shapeflow.backends.{type(self).__name__.strip('_').lower()}>"


class _Matmul(_Flags):
    allow_tf32 = False
    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True


class _Cuda(_Flags):
    def __init__(self) -> None:
        self.matmul = _Matmul()

    @staticmethod
    def is_built() -> bool:
        """False: shapeflow is not built with CUDA."""
        return False


class _Cudnn(_Flags):
    enabled = True
    benchmark = False
    deterministic = False
    allow_tf32 = True

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def version() -> None:
        return None


class _Mps(_Flags):
    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


class _Mkl(_Flags):
    @staticmethod
    def is_available() -> bool:
        """Whether 2-D float32/float64 matrix products go to Intel MKL."""
        from .backend import gemm

        return gemm.backend() == "mkl"


class _Cpu(_Flags):
    """The CPU's instruction sets: `get_cpu_capability()` as torch's, `features()` for the
    low-precision units (avx512_bf16, avx512_fp16, amx_bf16, amx_int8, avx512_vnni...)."""

    @staticmethod
    def get_cpu_capability() -> str:
        """'AVX512', 'AVX2' or 'DEFAULT' (the vector width shapeflow's kernels assume)."""
        from .backend import cpu

        return cpu.get_cpu_capability()

    @staticmethod
    def features() -> dict[str, bool]:
        """{feature: present}, e.g. features()['avx512_bf16'] (see backend/cpu.py)."""
        from .backend import cpu

        return cpu.features()


cpu = _Cpu()
cuda = _Cuda()
cudnn = _Cudnn()
mps = _Mps()
mkl = _Mkl()

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
    from ._porting import missing_attribute

    raise missing_attribute("module 'shapeflow.backends'", "torch.backends", name)
