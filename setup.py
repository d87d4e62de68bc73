"""Compiled parts of shapeflow: optional, each with a NumPy fallback when it fails to build.

The kernel libraries are plain C (loaded with ctypes) built for the CPU that compiles them;
each records the sha256 of the sources it was built from, and its loader refuses a stale
one. `_alloc` is a CPython extension that gives NumPy a cache of large buffers.
"""

import hashlib
import platform
from pathlib import Path

import numpy
from setuptools import Extension, setup

_ROOT = Path(__file__).parent
_NATIVE = {"x86_64": ["-march=native"], "AMD64": ["-march=native"],
           "aarch64": ["-mcpu=native"], "arm64": ["-mcpu=native"]}.get(platform.machine(), [])
# no traps, no errno: gcc may vectorize the selects and sqrt; no fast-math, so NaN and
# rounding stay IEEE (-ffp-contract=off: no fused multiply-add either)
_IEEE = ["-O3", "-fno-trapping-math", "-fno-math-errno", "-ffp-contract=off", "-fopenmp-simd"]
_PRODUCTS = ["-O3", "-ffp-contract=off"]
# attention's online softmax is compared with NumPy at a tolerance: fused multiply-adds allowed
_ATTENTION = ["-O3", "-fno-trapping-math", "-fno-math-errno", "-fopenmp-simd"]


_CPU = "src/shapeflow/backend/cpu"


def _library_files(source: str) -> list[str]:
    """A library's files in the order its digest reads them: <stem>.c, then every <stem>_*.c
    and <stem>_*.h beside it by name, then the shared isa.h (backend/cpu/native.py's
    `library_files`: one rule)."""
    stem = source.removesuffix(".c")
    parts = sorted(p.name for p in (_ROOT / _CPU).iterdir()
                   if p.name.startswith(f"{stem}_") and p.suffix in (".c", ".h"))
    return [f"{_CPU}/{name}" for name in (source, *parts, "isa.h")]


def _kernel_library(name: str, source: str, macro: str, flags: list[str]) -> Extension:
    """backend/cpu/<source> and its family files built as shapeflow.backend.cpu.<name>,
    `macro` naming the sha256 of them all, read one after another."""
    files = _library_files(source)
    digest = hashlib.sha256(b"".join((_ROOT / f).read_bytes() for f in files)).hexdigest()
    return Extension(f"shapeflow.backend.cpu.{name}", [f for f in files if f.endswith(".c")],
                     depends=[f for f in files if f.endswith(".h")],
                     define_macros=[(macro, f'"{digest}"')],
                     extra_compile_args=[*flags, *_NATIVE], optional=True)


setup(ext_modules=[
    _kernel_library("_kernels", "kernels.c", "SHAPEFLOW_KERNELS_SOURCE", _IEEE),
    _kernel_library("_qgemm", "qgemm.c", "SHAPEFLOW_QGEMM_SOURCE", _PRODUCTS),  # int8 (VNNI)
    _kernel_library("_bf16gemm", "bf16gemm.c", "SHAPEFLOW_BF16GEMM_SOURCE", _PRODUCTS),
    _kernel_library("_conv_kernels", "conv_kernels.c", "SHAPEFLOW_CONV_SOURCE", _IEEE),
    _kernel_library("_rnn_cell_kernels", "rnn_cell_kernels.c", "SHAPEFLOW_RNN_CELL_SOURCE",
                    _IEEE),
    _kernel_library("_norm_act_kernels", "norm_act_kernels.c", "SHAPEFLOW_NORM_ACT_SOURCE",
                    _IEEE),
    _kernel_library("_paged_attention", "paged_attention.c", "SHAPEFLOW_PAGED_SOURCE",
                    _ATTENTION),  # serving: attention over a paged KV cache
    Extension("shapeflow.backend.cpu._alloc", ["src/shapeflow/backend/cpu/alloc.c"],
              include_dirs=[numpy.get_include()], extra_compile_args=["-O2"], optional=True),
])
