"""backend.cpu: the low-precision instruction sets, as /proc/cpuinfo and cpuid report them."""

import pytest
import torch

import shapeflow as sf
from shapeflow.backend.cpu import features as cpu
from shapeflow.backend.cpu import kernels


def _proc_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def test_features_read_the_kernels_flags():
    flags = _proc_flags()
    if flags is None:
        pytest.skip("no /proc/cpuinfo x86 flags here")
    f = cpu.features()
    assert f["avx512_bf16"] == ("avx512_bf16" in flags)
    assert f["avx512_fp16"] == ("avx512_fp16" in flags)
    assert f["avx512_vnni"] == ("avx512_vnni" in flags)
    assert f["amx_bf16"] == ({"amx_tile", "amx_bf16"} <= flags)
    assert f["amx_int8"] == ({"amx_tile", "amx_int8"} <= flags)
    assert cpu.has("avx512_bf16") == f["avx512_bf16"]


def test_cpuid_in_c_agrees_with_proc_cpuinfo():
    """The compiled kernels ask cpuid (__builtin_cpu_supports) on their own: same answer."""
    if not kernels.available() or _proc_flags() is None:
        pytest.skip("needs the compiled kernels and /proc/cpuinfo")
    old = kernels.bf16_simd()
    try:
        assert kernels.bf16_simd(True) == (cpu.has("avx512_bf16") and
                                           "avx512vl" in _proc_flags())
    finally:
        kernels.bf16_simd(old)


def test_capability_is_torchs():
    ours = sf.backends.cpu.get_cpu_capability()
    assert ours in ("AVX512", "AVX2", "DEFAULT")
    theirs = torch.backends.cpu.get_cpu_capability()
    if theirs in ("AVX512", "AVX2", "DEFAULT"):
        assert ours == theirs


def test_public_query_and_unknown_names():
    assert sf.backends.cpu.features() == cpu.features()
    assert set(cpu.features()) >= {"avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8",
                                   "avx512_vnni"}
    with pytest.raises(KeyError, match="unknown CPU feature"):
        cpu.has("avx1024")


def test_version_reports_cpu_and_low_precision_paths(capsys):
    from shapeflow import cli

    with pytest.raises(SystemExit):
        cli.main(["--version"])
    out = capsys.readouterr().out
    assert cpu.describe() in out and "bf16/fp16 matmul: " in out
    for name, present in cpu.features().items():
        if present and name.startswith(("amx", "avx512_")):
            assert name in out.split("(no")[0]
