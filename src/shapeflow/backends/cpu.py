"""`torch.backends.cpu`: the CPU's instruction sets. `get_cpu_capability()` as torch's,
`features()` for the low-precision units (avx512_bf16, avx512_fp16, amx_bf16, amx_int8,
avx512_vnni...)."""

from __future__ import annotations


def get_cpu_capability() -> str:
    """'AVX512', 'AVX2' or 'DEFAULT' (the vector width shapeflow's kernels assume)."""
    from ..backend.cpu import features as cpu

    return cpu.get_cpu_capability()


def features() -> dict[str, bool]:
    """{feature: present}, e.g. features()['avx512_bf16'] (see backend/cpu.py)."""
    from ..backend.cpu import features as cpu

    return cpu.features()
