"""Training steps under autocast: shapeflow in sf.autocast against PyTorch in
torch.autocast("cpu", torch.bfloat16), one thread, and shapeflow's own float32 step.

Rows: the GPT 4-layer d256 step (batch 16 x 64 tokens, AdamW) and the demo ViT step
(batch 64, AdamW). `make bench` runs it from run.py; alone:
`PYTHONPATH=src python benchmarks/autocast.py [--quick]`.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the PyTorch twins the model tests check against

TARGET = 1.0  # shapeflow autocast / PyTorch autocast (issue 18)


def _steps(model, twin, sf_loss, torch_loss) -> dict:
    """shapeflow's step in sf.autocast, PyTorch's in torch.autocast, shapeflow's in fp32."""
    import torch

    import shapeflow as sf

    opt = sf.optim.AdamW(model.parameters(), lr=1e-3)
    topt = torch.optim.AdamW(twin.parameters(), lr=1e-3, foreach=False)

    def sf_step(amp: bool):
        with sf.autocast("cpu", dtype=sf.bfloat16, enabled=amp):
            loss = sf_loss(model)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def torch_step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch_loss(twin)
        loss.backward()
        topt.step()
        topt.zero_grad()

    return {"shapeflow": lambda: sf_step(True), "torch": torch_step,
            "shapeflow_fp32": lambda: sf_step(False)}


def gpt_step(n_layer: int = 4, n_embd: int = 256, T: int = 64, batch: int = 16) -> dict:
    import numpy as np
    import torch

    import shapeflow as sf
    from shapeflow.models import GPT
    from tests.models.twins import TorchGPT, copy_weights

    cfg = dict(vocab_size=65, block_size=T, n_layer=n_layer, n_head=4, n_embd=n_embd)
    sf.manual_seed(0)
    model = GPT(**cfg)
    twin = copy_weights(model, TorchGPT(**cfg))
    rng = np.random.default_rng(0)
    ia, ta = rng.integers(0, 65, (batch, T)), rng.integers(0, 65, (batch, T))
    idx, tgt, tidx, ttgt = sf.tensor(ia), sf.tensor(ta), torch.tensor(ia), torch.tensor(ta)
    return _steps(model, twin, lambda m: m(idx, tgt)[1], lambda m: m(tidx, ttgt)[1])


def vit_step() -> dict:
    import numpy as np
    import torch

    import shapeflow as sf
    from shapeflow.cli.demo import DEMO_VIT
    from shapeflow.models import ViT
    from shapeflow.nn import functional as F
    from tests.models.twins import TorchViT, copy_weights

    cfg = {k: v for k, v in DEMO_VIT.items() if k != "dropout"}
    sf.manual_seed(0)
    model = ViT(**cfg)
    twin = copy_weights(model, TorchViT(**cfg))
    rng = np.random.default_rng(0)
    xa, ya = rng.random((64, 1, 8, 8), np.float32), rng.integers(0, 10, 64)
    x, y, tx, ty = sf.tensor(xa), sf.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    return _steps(model, twin, lambda m: F.cross_entropy(m(x), y),
                  lambda m: torch.nn.functional.cross_entropy(m(tx), ty))


def _gemm_share(step, repeats: int = 3) -> float:
    """The share of `step`'s time inside the cpu kernel table's products (matmul,
    matmul_bias, matmul_accumulate: every Linear's; the attention's own block products are
    not counted, so this is a lower bound)."""
    import time

    from shapeflow.device import cpu

    table, spent = cpu.kernels, [0.0]
    names = ("matmul", "matmul_bias", "matmul_accumulate")

    def timing(inner):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t
        return timed

    step()
    for name in names:  # an instance attribute shadows the method while it is timed
        setattr(table, name, timing(getattr(table, name)))
    try:
        t = time.perf_counter()
        for _ in range(repeats):
            step()
        total = time.perf_counter() - t
    finally:
        for name in names:
            delattr(table, name)
    return spent[0] / total


def _bf16_over_fp32(n: int = 1024, repeats: int = 5) -> float:
    """How many times faster this machine multiplies n x n matrices in bfloat16 than in
    float32, through the same entry point (backend.gemm.matmul), best of `repeats`."""
    import time

    import ml_dtypes
    import numpy as np

    from shapeflow.backend.cpu import gemm

    rng = np.random.default_rng(0)
    a32, b32 = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    a16, b16 = a32.astype(ml_dtypes.bfloat16), b32.astype(ml_dtypes.bfloat16)

    def best(a, b):
        gemm.matmul(a, b)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            gemm.matmul(a, b)
            times.append(time.perf_counter() - t)
        return min(times)

    return best(a32, b32) / best(a16, b16)


def amdahl_bound(share: float, speedup: float) -> float:
    """The least autocast / fp32 time ratio products `speedup` times faster allow when they
    take `share` of the float32 step (everything else unchanged)."""
    return (1.0 - share) + share / speedup


def run(compare, rounds: int, quick: bool) -> dict:
    """The autocast rows, timed with run.py's `compare` (alternating sides), printed."""
    rows = {"gpt_4l_d256_autocast": (gpt_step, 1), "vit_step_autocast": (vit_step, 3)}
    out = {}
    for name, (make, number) in rows.items():
        r = compare(make(), rounds, 3 if quick else 5, number)
        s, t, f = (r[k]["median_s"] for k in ("shapeflow", "torch", "shapeflow_fp32"))
        out[name] = {**r, "ratio": s / t, "target": TARGET, "vs_own_fp32": s / f}
        print(f"{name:22} shapeflow {s * 1e3:8.2f} ms, torch {t * 1e3:8.2f} ms: ratio "
              f"{s / t:5.2f} (target <={TARGET}) {'ok' if s / t <= TARGET else 'MISS'}; "
              f"shapeflow fp32 {f * 1e3:8.2f} ms (autocast/fp32 {s / f:.2f}); spread "
              f"{r['shapeflow']['spread']:.0%}/{r['torch']['spread']:.0%}")
    # the second target: the autocast step at least as much faster than the float32
    # step as faster products allow for their share of it (Amdahl)
    share, speedup = _gemm_share(gpt_step()["shapeflow_fp32"]), _bf16_over_fp32()
    bound = amdahl_bound(share, speedup)
    got = out["gpt_4l_d256_autocast"]["vs_own_fp32"]
    out["gpt_4l_d256_autocast"].update(gemm_share_fp32=share, bf16_speedup_1024=speedup,
                                       amdahl_bound=bound)
    print(f"{'':22} products take {share:.0%} of the fp32 step (a lower bound) and run "
          f"{speedup:.2f}x faster in bf16 at 1024^3: autocast/fp32 can be {bound:.2f} at "
          f"best; it is {got:.2f} {'ok' if got <= bound * 1.05 else 'MISS'}")
    return out


def main(argv=None) -> int:
    import argparse

    from benchmarks.run import compare

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    run(compare, 3 if args.quick else 7, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
