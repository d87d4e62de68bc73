"""Compiled parts of shapeflow: optional, each with a NumPy fallback when it fails to build.

`_kernels` is plain C (loaded with ctypes) built for the CPU that compiles it; `_alloc` is
a CPython extension that gives NumPy a cache of large buffers.
"""

import hashlib
import platform
from pathlib import Path

import numpy
from setuptools import Extension, setup

_NATIVE = {"x86_64": ["-march=native"], "AMD64": ["-march=native"],
           "aarch64": ["-mcpu=native"], "arm64": ["-mcpu=native"]}.get(platform.machine(), [])

_KERNELS = "src/shapeflow/backend/kernels.c"
# the library records the source it was built from: backend/kernels.py refuses a stale one
_SOURCE = hashlib.sha256((Path(__file__).parent / _KERNELS).read_bytes()).hexdigest()
_QGEMM = "src/shapeflow/backend/qgemm.c"  # int8 products (AVX512-VNNI), quantized Linear
_BF16GEMM = "src/shapeflow/backend/bf16gemm.c"  # bfloat16 products (AVX512-BF16)
_BF16GEMM_SOURCE = hashlib.sha256((Path(__file__).parent / _BF16GEMM).read_bytes()).hexdigest()
_QGEMM_SOURCE = hashlib.sha256((Path(__file__).parent / _QGEMM).read_bytes()).hexdigest()

setup(ext_modules=[
    Extension("shapeflow.backend._kernels", [_KERNELS],
              define_macros=[("SHAPEFLOW_KERNELS_SOURCE", f'"{_SOURCE}"')],
              # no traps, no errno: gcc may vectorize the selects and sqrt; no fast-math, so NaN and
              # rounding stay IEEE (-ffp-contract=off: no fused multiply-add either)
              extra_compile_args=["-O3", "-fno-trapping-math", "-fno-math-errno",
                                  "-ffp-contract=off", "-fopenmp-simd",
                                  *_NATIVE], optional=True),
    Extension("shapeflow.backend._qgemm", [_QGEMM],
              define_macros=[("SHAPEFLOW_QGEMM_SOURCE", f'"{_QGEMM_SOURCE}"')],
              extra_compile_args=["-O3", "-ffp-contract=off", *_NATIVE], optional=True),
    Extension("shapeflow.backend._bf16gemm", [_BF16GEMM],
              define_macros=[("SHAPEFLOW_BF16GEMM_SOURCE", f'"{_BF16GEMM_SOURCE}"')],
              extra_compile_args=["-O3", "-ffp-contract=off", *_NATIVE], optional=True),
    Extension("shapeflow.backend._alloc", ["src/shapeflow/backend/alloc.c"],
              include_dirs=[numpy.get_include()], extra_compile_args=["-O2"], optional=True),
])
