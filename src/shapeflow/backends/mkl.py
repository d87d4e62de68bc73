"""`torch.backends.mkl`: whether 2-D float products go to Intel MKL (backend/cpu/gemm.py)."""

from __future__ import annotations


def is_available() -> bool:
    """Whether 2-D float32/float64 matrix products go to Intel MKL."""
    from ..backend.cpu import gemm

    return gemm.backend() == "mkl"
