"""The 175B GPT-3 configuration planned on the meta device: seconds and peak RSS.

Issue target: under 2 s and under 1 GB of RAM (96 layers, h 12288, 96 heads, s 2048).
"""

from __future__ import annotations

import resource
import sys
import time

import shapeflow as sf


def main() -> int:
    t = time.perf_counter()
    model = sf.models.GPT(51200, 2048, 96, 96, 12288, device="meta")
    idx = sf.empty(1, 2048, dtype=sf.int64, device="meta")
    rep = sf.memory.report(model, idx, idx, precision="bf16-true", optimizer="adamw")
    seconds = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    with open("/proc/self/status") as f:  # VmHWM: peak RSS of this program, not its parent
        hwm = [line for line in f if line.startswith("VmHWM")]
    if hwm:
        rss = int(hwm[0].split()[1]) * 1024
    math = sf.memory.report(model, idx, idx, precision="bf16-true", optimizer="adamw",
                            attention="math")
    print(rep)
    fmt = sf.memory.format_bytes
    print(f"attention kernel: flash {fmt(rep.activations)} of activations, peak "
          f"{fmt(rep.peak)}; math {fmt(math.activations)}, peak {fmt(math.peak)}")
    print(rep.plan(devices=64, zero=1, tensor_parallel=8, sequence_parallel=True))
    ok = seconds < 2 and rss < 1e9
    print(f"planned {rep.param_count / 1e9:.1f}B parameters in {seconds:.2f} s, max RSS "
          f"{rss / 2**20:.0f} MiB: {'ok' if ok else 'MISS'} (target < 2 s, < 1 GB)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
