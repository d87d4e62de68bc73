"""Two ranks on MPI: shapeflow's collectives and DDP against torch.distributed (gloo).

Run by `make bench` through `mpiexec -n 2` (or by hand: `.venv/bin/mpiexec -n 2
.venv/bin/python benchmarks/distributed.py [--quick]`); rank 0 prints the table as JSON
lines. One math thread per rank. All-reduce: float32 payloads from 1 KB to 64 MB, shapeflow
and gloo alternating, bandwidth = bytes / median time. GPT step (2 layers, d 128, batch 16
per rank): one rank alone, then both with DDP, each against PyTorch's DDP on gloo.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as tdist  # noqa: E402

import shapeflow as sf  # noqa: E402
import shapeflow.distributed as dist  # noqa: E402
from shapeflow.models import GPT  # noqa: E402
from tests.models.twins import TorchGPT, copy_weights  # noqa: E402

torch.set_num_threads(1)


def timed(fn, reps: int) -> float:
    """Median seconds of fn over reps calls, the ranks lined up before each."""
    out = []
    for _ in range(reps):
        dist.barrier()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def allreduce_rows(quick: bool) -> list[dict]:
    rows = []
    for size in [2**10, 2**14, 2**18, 2**22] + ([] if quick else [2**26]):
        a = sf.ones(size // 4)
        b = torch.ones(size // 4)
        reps = 5 if size >= 2**22 else 20
        sf_t, th_t = [], []
        for _ in range(3):  # alternate the two, so drift hits both
            sf_t.append(timed(lambda a=a: dist.all_reduce(a), reps))
            th_t.append(timed(lambda b=b: tdist.all_reduce(b), reps))
        s, t = min(sf_t), min(th_t)
        rows.append({"bytes": size, "shapeflow_GBps": size / s / 1e9,
                     "gloo_GBps": size / t / 1e9, "ratio": s / t})
    return rows


def gpt_rows(quick: bool) -> dict:
    rank = dist.get_rank()
    cfg = dict(vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=128)
    sf.manual_seed(0)
    model = GPT(**cfg)
    twin = copy_weights(model, TorchGPT(**cfg))
    rng = np.random.default_rng(rank)
    ia, ta = rng.integers(0, 65, (16, 64)), rng.integers(0, 65, (16, 64))
    idx, tgt, tidx, ttgt = sf.tensor(ia), sf.tensor(ta), torch.tensor(ia), torch.tensor(ta)

    def stepper(m, opt, run):
        def step():
            opt.zero_grad()
            run(m).backward()
            opt.step()
        return step

    reps = 3 if quick else 7
    ddp = sf.nn.parallel.DistributedDataParallel(model)
    tddp = torch.nn.parallel.DistributedDataParallel(twin)
    one_sf = stepper(model, sf.optim.AdamW(model.parameters(), lr=1e-3),
                     lambda m: m(idx, tgt)[1])
    one_th = stepper(twin, torch.optim.AdamW(twin.parameters(), lr=1e-3, foreach=False),
                     lambda m: m(tidx, ttgt)[1])
    two_sf = stepper(ddp, sf.optim.AdamW(ddp.parameters(), lr=1e-3), lambda m: m(idx, tgt)[1])
    two_th = stepper(tddp, torch.optim.AdamW(tddp.parameters(), lr=1e-3, foreach=False),
                     lambda m: m(tidx, ttgt)[1])
    for fn in (one_sf, one_th, two_sf, two_th):
        fn()  # warm up
    res = {k: [] for k in ("sf_1", "torch_1", "sf_2", "torch_2")}
    for _ in range(reps):
        if rank == 0:  # one rank alone (the other waits at the barrier)
            res["sf_1"].append(_once(one_sf))
            res["torch_1"].append(_once(one_th))
        dist.barrier()
        res["sf_2"].append(timed(two_sf, 1))
        res["torch_2"].append(timed(two_th, 1))
    med = {k: statistics.median(v) if v else None for k, v in res.items()}
    if rank == 0:
        med["sf_scaling"] = 2 * med["sf_1"] / med["sf_2"]
        med["ddp_ratio"] = med["sf_2"] / med["torch_2"]
    return med


def _once(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    quick = "--quick" in sys.argv
    dist.init_process_group()
    rank, n = dist.get_rank(), dist.get_world_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    tdist.init_process_group("gloo", rank=rank, world_size=n)
    rows = allreduce_rows(quick)
    gpt = gpt_rows(quick)
    if rank == 0:
        print(json.dumps({"allreduce": rows, "gpt_ddp": gpt}))
    tdist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
