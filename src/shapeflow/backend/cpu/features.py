"""What this CPU offers for low-precision math (AVX512-BF16/FP16, AMX, VNNI), from the
flags the kernel reports in /proc/cpuinfo.

`features()` answers the questions the bfloat16/float16 and int8 paths ask;
`get_cpu_capability()` is PyTorch's coarse answer ('AVX512', 'AVX2', 'DEFAULT'). Where
/proc/cpuinfo is absent (not Linux) every feature reads False and the capability
'DEFAULT': shapeflow then takes its portable paths, which are correct everywhere.
"""

from __future__ import annotations

from .kernels import _cpu_flags

# shapeflow's names -> the /proc/cpuinfo flags that must all be present
_FEATURES = {
    "avx2": ("avx2", "fma"),
    "f16c": ("f16c",),
    "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512dq"),
    "avx512_bf16": ("avx512_bf16",),   # vcvtne2ps2bf16, vdpbf16ps: bf16 dot products
    "avx512_fp16": ("avx512_fp16",),   # native float16 arithmetic (Sapphire Rapids on)
    "avx512_vnni": ("avx512_vnni",),   # int8 dot products (vpdpbusd)
    "avx_vnni": ("avx_vnni",),
    "amx_bf16": ("amx_tile", "amx_bf16"),  # Intel AMX tiles: bf16 and int8 matrix units
    "amx_int8": ("amx_tile", "amx_int8"),
    "amx_fp16": ("amx_tile", "amx_fp16"),
    "arm_bf16": ("bf16",),             # aarch64: BFDOT/BFMMLA
    "arm_fp16": ("asimdhp",),
    "arm_i8mm": ("i8mm",),
}
_cache: dict = {}


def features() -> dict[str, bool]:
    """{feature: present} for the low-precision instruction sets shapeflow knows of."""
    if not _cache:
        flags = _cpu_flags() or set()
        _cache.update({name: all(f in flags for f in need) for name, need in _FEATURES.items()})
    return dict(_cache)


def has(feature: str) -> bool:
    """Whether this CPU has `feature` (a key of features(); KeyError for an unknown name)."""
    if feature not in _FEATURES:
        raise KeyError(f"unknown CPU feature {feature!r}: expected one of "
                       + ", ".join(_FEATURES))
    return features()[feature]


def get_cpu_capability() -> str:
    """As torch.backends.cpu.get_cpu_capability(): 'AVX512', 'AVX2' or 'DEFAULT'."""
    f = features()
    return "AVX512" if f["avx512"] else "AVX2" if f["avx2"] else "DEFAULT"


def describe() -> str:
    """One line for `shapeflow --version`: the capability and the low-precision units."""
    f = features()
    low = [n for n in ("amx_bf16", "amx_int8", "amx_fp16", "avx512_bf16", "avx512_fp16",
                       "avx512_vnni", "avx_vnni", "arm_bf16", "arm_fp16", "arm_i8mm") if f[n]]
    missing = [n for n in ("amx_bf16", "avx512_bf16", "avx512_fp16", "avx512_vnni")
               if not f[n]]
    text = f"cpu: {get_cpu_capability()}, low precision: {' '.join(low) or 'none'}"
    return text + (f" (no {', '.join(missing)})" if missing else "")
