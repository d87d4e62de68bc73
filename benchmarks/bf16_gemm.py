"""bfloat16/float16 matrix products, one thread: shapeflow against PyTorch and against
shapeflow's own float32 sgemm.

Rows: a 1024x1024x1024 product in bf16, fp16 and fp32 (GFLOP/s), and a bf16 Linear at a
GPT block's shape (B*T = 1024 tokens, 256 -> 1024), forward and forward + backward. The
sides alternate round by round; each row gives the median and the spread (interquartile
range over the median). `python benchmarks/bf16_gemm.py [--quick]`, or a section of
`make bench` (benchmarks/run.py).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before NumPy, MKL or PyTorch load: one thread

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import shapeflow as sf  # noqa: E402
from shapeflow.backend.cpu import features as cpu  # noqa: E402
from shapeflow.backend.cpu import gemm  # noqa: E402
from shapeflow.nn import functional as F  # noqa: E402

N = 1024
TOKENS, D_IN, D_OUT = 1024, 256, 1024
# the products of one GPT 4L d256 autocast step (benchmarks/autocast.py), per layer: a's
# shape and layout ('T': a transposed view, 'N': rows contiguous), then b's
GPT_SHAPES = [((1024, 1024), "T", (1024, 256), "N"), ((1024, 1024), "N", (1024, 256), "T"),
              ((256, 1024), "T", (1024, 1024), "N"), ((1024, 1024), "N", (1024, 256), "N"),
              ((1024, 256), "N", (256, 1024), "T"), ((1024, 256), "N", (256, 1024), "N"),
              ((768, 1024), "T", (1024, 256), "N"), ((1024, 768), "N", (768, 256), "N"),
              ((1024, 256), "N", (256, 768), "T"), ((256, 1024), "T", (1024, 256), "N"),
              ((1024, 256), "N", (256, 256), "T"), ((1024, 256), "N", (256, 256), "N")]


def _alternate(fns: dict, rounds: int, number: int) -> dict:
    """{name: (median seconds per call, spread)}, the functions taking turns each round."""
    for fn in fns.values():
        fn()  # warm up: MKL's buffers, the allocator, lazy imports
    samples: dict[str, list] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t = time.perf_counter()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter() - t) / number)
    out = {}
    for k, s in samples.items():
        med = statistics.median(s)
        q = statistics.quantiles(s, n=4) if len(s) >= 4 else [min(s), med, max(s)]
        out[k] = (med, (q[2] - q[0]) / med)
    return out


def _pair(shape, sdt, tdt, grad=False):
    a = np.random.default_rng(len(shape) + shape[0]).standard_normal(shape, np.float32)
    t = torch.from_numpy(a).to(tdt).requires_grad_(grad)
    s = sf.from_numpy(a).to(sdt)
    return (s.detach().requires_grad_() if grad else s), t


def matmul_rows(rounds: int) -> dict:
    """{label: (median s, spread)} for the 1024^3 products."""
    fns = {}
    for name, sdt, tdt in (("bf16", sf.bfloat16, torch.bfloat16),
                           ("fp16", sf.float16, torch.float16),
                           ("fp32", sf.float32, torch.float32)):
        a, ta = _pair((N, N), sdt, tdt)
        b, tb = _pair((N, N + 1), sdt, tdt)
        b, tb = b[:, :N], tb[:, :N]  # not a power-of-two leading dim (no cache aliasing)
        fns[f"shapeflow {name}"] = lambda a=a, b=b: a @ b
        fns[f"torch {name}"] = lambda ta=ta, tb=tb: ta @ tb
    return _alternate(fns, rounds, 2)


def linear_rows(rounds: int) -> dict:
    """{label: (median s, spread)} for the bf16 Linear, forward and forward + backward."""
    x, tx = _pair((TOKENS, D_IN), sf.bfloat16, torch.bfloat16, grad=True)
    w, tw = _pair((D_OUT, D_IN), sf.bfloat16, torch.bfloat16, grad=True)
    b, tb = _pair((D_OUT,), sf.bfloat16, torch.bfloat16, grad=True)
    g, tg = _pair((TOKENS, D_OUT), sf.bfloat16, torch.bfloat16)

    def sf_step():
        F.linear(x, w, b).backward(g)

    def torch_step():
        torch.nn.functional.linear(tx, tw, tb).backward(tg)

    with sf.no_grad(), torch.no_grad():
        fwd = _alternate({"shapeflow fwd": lambda: F.linear(x, w, b),
                          "torch fwd": lambda: torch.nn.functional.linear(tx, tw, tb)},
                         rounds, 10)
    step = _alternate({"shapeflow fwd+bwd": sf_step, "torch fwd+bwd": torch_step}, rounds, 5)
    return {**fwd, **step}


def _layout(rng, shape, layout):
    """A bfloat16 array of `shape`: rows contiguous ('N') or a transposed view ('T')."""
    import ml_dtypes

    x = rng.standard_normal(shape[::-1] if layout == "T" else shape, np.float32)
    x = x.astype(ml_dtypes.bfloat16)
    return x.T if layout == "T" else x


def gpt_rows(rounds: int) -> dict:
    """{label: (shapeflow s, torch s, spreads)}: gemm.half_matmul against torch.matmul on
    the same bfloat16 operands, the same layouts."""
    rng = np.random.default_rng(0)
    rows = {}
    for sa, la, sb, lb in GPT_SHAPES:
        a, b = _layout(rng, sa, la), _layout(rng, sb, lb)
        ta, tb = torch.from_numpy(a.view(np.int16)), torch.from_numpy(b.view(np.int16))
        ta, tb = ta.view(torch.bfloat16), tb.view(torch.bfloat16)
        res = _alternate({"shapeflow": lambda a=a, b=b: gemm.half_matmul(a, b),
                          "torch": lambda ta=ta, tb=tb: ta @ tb}, rounds, 3)
        rows[f"{sa}{la}@{sb}{lb}"] = (res["shapeflow"], res["torch"], 2.0 * sa[0] * sa[1] * sb[1])
    return rows


def report(quick: bool = False) -> dict:
    """Measure, print the rows, return them (for benchmarks/run.py's JSON)."""
    rounds = 5 if quick else 11
    mm = matmul_rows(rounds)
    lin = linear_rows(rounds)
    flop = 2.0 * N**3
    print(f"bf16/fp16 matmul {N}^3, 1 thread ({cpu.describe()}; shapeflow: "
          f"{gemm.half_backend()})")
    rates = {}
    for name in ("bf16", "fp16", "fp32"):
        (s, s_sp), (t, t_sp) = mm[f"shapeflow {name}"], mm[f"torch {name}"]
        rates[name] = {"shapeflow_gflops": flop / s / 1e9, "torch_gflops": flop / t / 1e9,
                       "spread": [s_sp, t_sp]}
        print(f"  {name} matmul: shapeflow {flop / s / 1e9:6.1f} GFLOP/s, torch "
              f"{flop / t / 1e9:6.1f} GFLOP/s, ratio {s / t:.2f}, spread "
              f"{s_sp:.0%}/{t_sp:.0%}")
    ratio = rates["bf16"]["shapeflow_gflops"] / rates["fp32"]["shapeflow_gflops"]
    print(f"  shapeflow bf16 / its own fp32 sgemm: x{ratio:.2f}")
    flop_lin = 2.0 * TOKENS * D_IN * D_OUT
    rows = {}
    for part, k in (("fwd", 1), ("fwd+bwd", 3)):
        (s, s_sp), (t, t_sp) = lin[f"shapeflow {part}"], lin[f"torch {part}"]
        rows[part] = {"shapeflow_s": s, "torch_s": t, "spread": [s_sp, t_sp]}
        print(f"  bf16 Linear {TOKENS}x{D_IN}->{D_OUT} {part}: shapeflow {s * 1e3:.2f} ms "
              f"({k * flop_lin / s / 1e9:.0f} GFLOP/s), torch {t * 1e3:.2f} ms, ratio "
              f"{s / t:.2f}, spread {s_sp:.0%}/{t_sp:.0%}")
    gpt = {}
    print("  bf16 products of the GPT 4L d256 autocast step (a @ b, T: a transposed view):")
    for label, ((s, s_sp), (t, t_sp), flop) in gpt_rows(rounds).items():
        gpt[label] = {"shapeflow_gflops": flop / s / 1e9, "torch_gflops": flop / t / 1e9,
                      "spread": [s_sp, t_sp]}
        print(f"    {label:32s} shapeflow {flop / s / 1e9:6.1f} GFLOP/s, torch "
              f"{flop / t / 1e9:6.1f} GFLOP/s, ratio {s / t:.2f}, spread "
              f"{s_sp:.0%}/{t_sp:.0%}")
    return {"matmul_1024": rates, "bf16_over_fp32": ratio, "linear_gpt": rows,
            "gpt_products": gpt, "cpu": cpu.features()}


if __name__ == "__main__":
    torch.set_num_threads(1)
    report("--quick" in sys.argv[1:])
