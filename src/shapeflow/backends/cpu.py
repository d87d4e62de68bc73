"""`torch.backends.cpu`: the CPU's instruction sets. `get_cpu_capability()` as torch's,
`features()` for the low-precision units (avx512_bf16, avx512_fp16, amx_bf16, amx_int8,
avx512_vnni...). Also shapeflow's own: which path (MKL, the compiled C, NumPy) each kernel of
the cpu device ran, `kernel_stats()`, and which compiled libraries loaded, `libraries()`."""

from __future__ import annotations


def get_cpu_capability() -> str:
    """'AVX512', 'AVX2' or 'DEFAULT' (the vector width shapeflow's kernels assume)."""
    from ..backend.cpu import features as cpu

    return cpu.get_cpu_capability()


def features() -> dict[str, bool]:
    """{feature: present}, e.g. features()['avx512_bf16'] (see backend/cpu.py)."""
    from ..backend.cpu import features as cpu

    return cpu.features()


def kernel_stats() -> dict[tuple[str, str], int]:
    """{(kernel, path): calls} of the cpu device's kernel table in this process, since its
    start or the last `reset_kernel_stats()`; path is 'mkl', 'compiled' or 'numpy'.

    E.g. `kernel_stats().get(("adam", "numpy"), 0) == 0`: every Adam update ran compiled."""
    from ..backend.cpu import ladder

    return ladder.kernel_stats()


def reset_kernel_stats() -> None:
    """Start counting the cpu kernels' paths from zero."""
    from ..backend.cpu import ladder

    ladder.reset_kernel_stats()


def libraries() -> dict[str, str]:
    """{library: 'loaded' or why not} for MKL and each compiled C library of the cpu device
    (loading them if not yet loaded)."""
    from ..backend.cpu import (
        bf16gemm,
        conv_kernels,
        gemm,
        igemm,
        kernels,
        norm_act_kernels,
        rnn_cell_kernels,
    )

    out = {"mkl": "loaded" if gemm.backend() == "mkl" else "not found (NumPy's matmul runs)"}
    for name, module in (("kernels.c", kernels), ("conv_kernels.c", conv_kernels),
                         ("norm_act_kernels.c", norm_act_kernels),
                         ("rnn_cell_kernels.c", rnn_cell_kernels), ("bf16gemm.c", bf16gemm)):
        out[name] = "loaded" if module.available() else _why(module._state)
    out["qgemm.c"] = "loaded" if igemm.backend() == "vnni" else _why(igemm._state)
    return out


def _why(state: dict) -> str:
    refused = state.get("refused")
    if refused:
        return f"off: {refused}"
    if state.get("enabled") is False:
        return "off: turned off in this process"
    return "off: not built, not allowed (SHAPEFLOW_KERNELS=0) or not for this CPU"
