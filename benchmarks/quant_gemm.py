"""int8 products against float32 and PyTorch's dynamic-quantized Linear, one thread.

Two workloads: a 1024^3 product, and a Linear at the GPT's shapes (B*T = 1024 tokens,
256 -> 1024 features). Each runs as shapeflow's int8 (`sf.quant` "int8": per-token int8
activations, int32 products, the scales applied; `_raw`: int8 in, int32 out, nothing
else), shapeflow's float32 (sgemm), PyTorch's
`quantize_dynamic` Linear (fbgemm) and PyTorch's float Linear, alternating round by round
on the same data. Rates are GFLOP-equivalent/s: 2*M*N*K over the median time. Target:
shapeflow int8 faster than shapeflow float32. `python benchmarks/quant_gemm.py [--quick]`.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import shapeflow as sf  # noqa: E402
from shapeflow.backend.cpu import gemm, igemm  # noqa: E402

SHAPES = {"matmul_1024": (1024, 1024, 1024), "linear_gpt_1024x256x1024": (1024, 256, 1024)}


def _sides(m: int, k: int, n: int) -> dict:
    """name -> a call computing the [m, k] x [k, n] product (or the Linear) that way."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(np.float32)
    lin = sf.nn.Linear(k, n)
    q = sf.quant.QuantizedLinear.from_float(lin, "int8")
    w = lin.weight.detach().numpy()
    xs = sf.tensor(x)
    tl = torch.nn.Linear(k, n)
    with torch.no_grad():
        tl.weight.copy_(torch.from_numpy(w))
        tl.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tq = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(tl), {torch.nn.Linear},
                                                    dtype=torch.qint8)
    tx = torch.from_numpy(x)
    wt = np.ascontiguousarray(w.T)
    aq = rng.integers(-127, 128, (m, k), dtype=np.int8)
    wq = q.weight_qdata.numpy()

    def sf_int8():
        with sf.no_grad():
            return q(xs)

    def torch_int8():
        with torch.no_grad():
            return tq(tx)

    def torch_fp32():
        with torch.no_grad():
            return tl(tx)

    return {"sf_int8": sf_int8, "sf_int8_raw": lambda: igemm.int8_matmul(aq, wq),
            "sf_fp32_sgemm": lambda: gemm.matmul(x, wt),
            "torch_dynamic_int8": torch_int8, "torch_fp32": torch_fp32}


def measure(m: int, k: int, n: int, rounds: int = 5, repeat: int = 3) -> dict:
    """Median seconds, GFLOP-equivalent/s and spread (IQR / median) per side."""
    sides = _sides(m, k, n)
    for fn in sides.values():
        fn()
    samples: dict[str, list] = {s: [] for s in sides}
    for _ in range(rounds):  # alternate the sides, so a noisy neighbour hits them all
        for s, fn in sides.items():
            for _ in range(repeat):
                t = time.perf_counter()
                fn()
                samples[s].append(time.perf_counter() - t)
    out = {}
    for s, v in samples.items():
        med = statistics.median(v)
        q = statistics.quantiles(v, n=4)
        out[s] = {"median_s": med, "gflops": 2 * m * n * k / med / 1e9,
                  "spread": (q[2] - q[0]) / med, "min_s": min(v)}
    return out


def report(quick: bool = False) -> dict:
    """Run both workloads and print a table; the results by workload."""
    results = {"int8_backend": igemm.backend(), "blas": gemm.backend()}
    print(f"int8 products: {results['int8_backend']}, float32: {results['blas']}; GFLOP-"
          "equivalent/s (median, spread = IQR/median), one thread")
    for name, (m, k, n) in SHAPES.items():
        r = measure(m, k, n, rounds=3 if quick else 7)
        ratio = r["sf_int8"]["gflops"] / r["sf_fp32_sgemm"]["gflops"]
        r["int8_over_fp32"] = ratio
        r["int8_over_torch_int8"] = r["sf_int8"]["gflops"] / r["torch_dynamic_int8"]["gflops"]
        results[name] = r
        cells = "  ".join(f"{s} {v['gflops']:6.1f} ({v['spread']:.0%})" for s, v in r.items()
                          if isinstance(v, dict))
        print(f"{name:26} {cells}  int8/fp32 x{ratio:.2f} "
              f"{'ok' if ratio > 1 else 'MISS'} (target > 1)")
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds")
    report(p.parse_args(argv).quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
