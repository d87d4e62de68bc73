"""`make bench`: shapeflow against PyTorch CPU, one thread each, back to back in one process.

Each workload runs both frameworks on the same data, alternating in rounds (A B A B ...),
and reports medians, the spread (interquartile range over the median) and the ratio
shapeflow / PyTorch. One thread, set before NumPy or PyTorch is imported: two-thread
timings on these machines vary 2-5x (../shared/BENCHMARKING.md). `--quick` takes under a
minute; `--json PATH` writes the results.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the PyTorch twins the model tests check against

import torch  # noqa: E402

import shapeflow as sf  # noqa: E402
from benchmarks import attention_peak, bf16_gemm, numpy_gpt, numpy_mlp, quant_gemm, tinygrad_mlp  # noqa: E402
from benchmarks import autocast as autocast_bench  # noqa: E402
from shapeflow.backend.cpu import buffers, gemm, kernels  # noqa: E402
from shapeflow.models import GPT, MLP, CharLSTM, ResNet, ViT  # noqa: E402
from shapeflow.nn import functional as F  # noqa: E402
from tests.models.twin_resnet import TorchResNet  # noqa: E402
from tests.models.twins import TorchCharLSTM, TorchGPT, TorchViT, copy_weights  # noqa: E402

torch.set_num_threads(1)


def timeit(fn, repeat: int, number: int) -> list[float]:
    """Seconds per call of fn, `repeat` samples of `number` calls each."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number)
    return out


def compare(fns: dict, rounds: int, repeat: int, number: int) -> dict:
    """Median and spread per side, alternating the sides round by round."""
    for fn in fns.values():
        fn()  # warm up: caches, allocator, lazy imports
    samples: dict[str, list] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            samples[k] += timeit(fn, repeat, number)
    out = {}
    for k, s in samples.items():
        med = statistics.median(s)
        q = statistics.quantiles(s, n=4) if len(s) >= 4 else [min(s), med, max(s)]
        out[k] = {"median_s": med, "spread": (q[2] - q[0]) / med}
    return out


# ---- workloads --------------------------------------------------------------------------------
def per_op(op: str, grad: bool):
    a, b = np.random.rand(4, 4).astype(np.float32), np.random.rand(4, 4).astype(np.float32)
    x, y = sf.tensor(a, requires_grad=grad), sf.tensor(b, requires_grad=grad)
    tx, ty = torch.tensor(a, requires_grad=grad), torch.tensor(b, requires_grad=grad)
    if op == "add":
        return {"shapeflow": lambda: x + y, "torch": lambda: tx + ty, "numpy": lambda: a + b}
    return {"shapeflow": lambda: x @ y, "torch": lambda: tx @ ty, "numpy": lambda: a @ b}


def large(op: str):
    n = 1024 if op == "add" else 512
    a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
    x, y, tx, ty = sf.tensor(a), sf.tensor(b), torch.tensor(a), torch.tensor(b)
    if op == "add":
        return {"shapeflow": lambda: x + y, "torch": lambda: tx + ty, "numpy": lambda: a + b}
    return {"shapeflow": lambda: x @ y, "torch": lambda: tx @ ty, "numpy": lambda: a @ b}


def _steps(model, twin, make_opt, make_topt, sf_loss, torch_loss):
    opt, topt = make_opt(model.parameters()), make_topt(twin.parameters())

    def sf_step():
        loss = sf_loss(model)
        loss.backward()
        opt.step()
        opt.zero_grad()

    def torch_step():
        loss = torch_loss(twin)
        loss.backward()
        topt.step()
        topt.zero_grad()

    return {"shapeflow": sf_step, "torch": torch_step}


def mlp_step():
    sf.manual_seed(0)
    model = MLP(784, [256, 256], 10)
    twin = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10))
    with torch.no_grad():  # the same weights
        for tp, p in zip(twin.parameters(), model.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy()))
    rng = np.random.default_rng(0)
    xa, ya = rng.random((128, 784), np.float32), rng.integers(0, 10, 128)
    x, y, tx, ty = sf.tensor(xa), sf.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    fns = _steps(model, twin, lambda p: sf.optim.SGD(p, lr=0.01),
                 lambda p: torch.optim.SGD(p, lr=0.01),
                 lambda m: F.cross_entropy(m(x), y),
                 lambda m: torch.nn.functional.cross_entropy(m(tx), ty))
    weights = [p.detach().numpy().copy() for p in model.parameters()]
    fns["numpy"] = numpy_mlp.make_step([w.copy() for w in weights], xa, ya, lr=0.01)
    tiny, why = tinygrad_mlp.make_step(weights, xa, ya, lr=0.01)
    if tiny is not None:
        fns["tinygrad"] = tiny
    NOTES["tinygrad"] = why or "ran (its CPU device, TinyJit, its own threading defaults)"
    return fns


NOTES: dict[str, str] = {}  # what the header says of optional comparisons


MLP_FLOPS = 6 * 128 * (784 * 256 + 256 * 256 + 256 * 10)  # forward 2, backward 4 per MAC

VIT_DEMO = dict(image_size=8, patch_size=2, in_channels=1, num_classes=10, dim=64, depth=2,
                heads=4, mlp_ratio=2)


def vit_step():
    sf.manual_seed(0)
    model = ViT(**VIT_DEMO)
    twin = copy_weights(model, TorchViT(**VIT_DEMO))
    rng = np.random.default_rng(0)
    xa, ya = rng.random((64, 1, 8, 8), np.float32), rng.integers(0, 10, 64)
    x, y, tx, ty = sf.tensor(xa), sf.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    return _steps(model, twin, lambda p: sf.optim.AdamW(p, lr=3e-3),
                  lambda p: torch.optim.AdamW(p, lr=3e-3, foreach=False),
                  lambda m: F.cross_entropy(m(x), y),
                  lambda m: torch.nn.functional.cross_entropy(m(tx), ty))


# the `shapeflow train resnet` model: ResNet-18's layout, one block a stage, 8x8 images
RESNET_DIGITS = dict(layers=(1, 1, 1, 1), num_classes=10, in_channels=1, width=16,
                     small_input=True)


def resnet_step():
    sf.manual_seed(0)
    model = ResNet(**RESNET_DIGITS)
    twin = TorchResNet(**RESNET_DIGITS)
    twin.load_state_dict({k: torch.from_numpy(np.array(v.numpy()))
                          for k, v in model.state_dict().items()})
    rng = np.random.default_rng(0)
    xa, ya = rng.random((32, 1, 8, 8), np.float32), rng.integers(0, 10, 32)
    x, y, tx, ty = sf.tensor(xa), sf.tensor(ya), torch.tensor(xa), torch.tensor(ya)
    return _steps(model, twin, lambda p: sf.optim.SGD(p, lr=0.01, momentum=0.9),
                  lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, foreach=False),
                  lambda m: F.cross_entropy(m(x), y),
                  lambda m: torch.nn.functional.cross_entropy(m(tx), ty))


def gpt_step(n_layer: int, n_embd: int, T: int = 64, batch: int = 16):
    cfg = dict(vocab_size=65, block_size=T, n_layer=n_layer, n_head=4, n_embd=n_embd)
    sf.manual_seed(0)
    model = GPT(**cfg)
    twin = copy_weights(model, TorchGPT(**cfg))
    rng = np.random.default_rng(0)
    ia, ta = rng.integers(0, 65, (batch, T)), rng.integers(0, 65, (batch, T))
    idx, tgt, tidx, ttgt = sf.tensor(ia), sf.tensor(ta), torch.tensor(ia), torch.tensor(ta)
    floor = numpy_gpt.make_step(twin, ia, ta, lr=1e-3)  # before any step changes the weights
    fns = _steps(model, twin, lambda p: sf.optim.AdamW(p, lr=1e-3),
                 lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=False),
                 lambda m: m(idx, tgt)[1], lambda m: twin(tidx, ttgt)[1])
    fns["numpy"] = floor
    return fns


LSTM_STEP = dict(vocab_size=65, embed_dim=64, hidden_size=256, num_layers=1)


def lstm_step():
    """A CharLSTM training step: batch 32, L 64, hidden 256 (one layer), Adam."""
    sf.manual_seed(0)
    model = CharLSTM(**LSTM_STEP)
    twin = copy_weights(model, TorchCharLSTM(*LSTM_STEP.values()))
    rng = np.random.default_rng(0)
    ia, ta = rng.integers(0, 65, (32, 64)), rng.integers(0, 65, (32, 64))
    idx, tgt, tidx, ttgt = sf.tensor(ia), sf.tensor(ta), torch.tensor(ia), torch.tensor(ta)
    return _steps(model, twin, lambda p: sf.optim.Adam(p, lr=1e-3),
                  lambda p: torch.optim.Adam(p, lr=1e-3, foreach=False),
                  lambda m: m(idx, tgt)[1], lambda m: twin(tidx, ttgt)[1])


def sgemm_flops(quick: bool) -> float:
    """The machine's sgemm rate: the faster of NumPy's BLAS and MKL (when installed)."""
    a, b = np.random.rand(1024, 1024).astype(np.float32), np.random.rand(1024, 1024).astype(
        np.float32)
    best = float("inf")
    for fn in (lambda: a @ b, lambda: gemm.matmul(a, b)):
        fn()
        best = min(best, *timeit(fn, 3 if quick else 7, 3))
    return 2 * 1024**3 / best


def plan_175b() -> dict:
    t = time.perf_counter()
    # VmHWM, not ru_maxrss: after fork + exec the latter still counts this (torch) process
    code = ("import time, shapeflow as sf; t = time.perf_counter(); "
            "m = sf.models.GPT(51200, 2048, 96, 96, 12288, device='meta'); "
            "i = sf.empty(1, 2048, dtype=sf.int64, device='meta'); "
            "r = sf.memory.report(m, i, i, precision='bf16-true', optimizer='adamw'); "
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')]; "
            "print(time.perf_counter() - t, int(hwm[0].split()[1]) * 1024, r.param_count)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    return {"seconds": float(out[0]), "max_rss_bytes": int(out[1]), "params": int(out[2]),
            "wall_s": time.perf_counter() - t}


def import_time(module: str, n: int) -> float:
    times = []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", f"import time; t = time.perf_counter(); "
                              f"import {module}; print(time.perf_counter() - t)"],
                             capture_output=True, text=True, check=True)
        times.append(float(out.stdout))
    return statistics.median(times)


# ---- the table --------------------------------------------------------------------------------
TARGETS = {"mlp_step": 1.0, "vit_step": 1.1, "gpt_2l_d128": 1.1, "gpt_4l_d256": 1.1,
           "gpt_4l_d256_t512": 1.0, "resnet_step": 1.2, "lstm_b32_l64_h256": 1.2,
           "add_4x4_grad": 1.0, "matmul_4x4_grad": 1.0, "lstmcell_loop_f64": 1.0,
           "llama_small_d64": 1.0, "llama_small_d288": 1.0, "style_transfer": 1.0,
           "resnet18_32px": 1.0}


def main(argv=None) -> int:
    from benchmarks import (  # (issue 37's rows: own modules)
        llama_small,
        lstmcell_loop_f64,
        resnet18_32px,
        style_transfer,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds (under a minute)")
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results.json"),
                   help="where to write the results")
    p.add_argument("--only", help="one model step (e.g. resnet_step): that row and its note; "
                   "attention_peak: the T = 512 GPT step's peak memory")
    args = p.parse_args(argv)
    q = args.quick
    rounds = 3 if q else 7
    if args.only:  # one step row, printed, nothing written: a cheap check on a shared machine
        makers = {"resnet_step": (resnet_step, 3), "vit_step": (vit_step, 5),
                  "mlp_step": (mlp_step, 20), "lstm_b32_l64_h256": (lstm_step, 1),
                  "gpt_2l_d128": (lambda: gpt_step(2, 128), 1),
                  "gpt_4l_d256_t512": (lambda: gpt_step(4, 256, T=512, batch=4), 1),
                  "lstmcell_loop_f64": (lstmcell_loop_f64.make, 1),
                  "style_transfer": (style_transfer.make_step, 1),
                  "resnet18_32px": (resnet18_32px.make_step, 1),
                  **{n: (lambda n=n: llama_small.make_step(n), 1) for n in llama_small.CONFIGS}}
        if args.only == "attention_peak":
            print(attention_peak.describe(attention_peak.measure()))
            return 0
        make, number = makers[args.only]
        r = compare(make(), rounds, 3 if q else 5, number)
        s, t = r["shapeflow"]["median_s"], r["torch"]["median_s"]
        print(f"{args.only}: shapeflow {_fmt(s)}, torch {_fmt(t)}, ratio {s / t:.2f} "
              f"(target {TARGETS.get(args.only)}), spread "
              f"{r['shapeflow']['spread']:.0%}/{r['torch']['spread']:.0%}")
        return 0
    rows = {}
    for op in ("add", "matmul"):
        for grad in (False, True):
            name = f"{op}_4x4{'_grad' if grad else ''}"
            rows[name] = compare(per_op(op, grad), rounds, 5, 2000 if q else 5000)
        rows[f"{op}_large"] = compare(large(op), rounds, 3, 5 if q else 20)
    steps = {"mlp_step": (mlp_step, 20), "vit_step": (vit_step, 5),
             "gpt_2l_d128": (lambda: gpt_step(2, 128), 1),
             "gpt_4l_d256": (lambda: gpt_step(4, 256), 1),
             "gpt_4l_d256_t512": (lambda: gpt_step(4, 256, T=512, batch=4), 1),
             "resnet_step": (resnet_step, 3), "lstm_b32_l64_h256": (lstm_step, 1)}
    for name, (make, number) in steps.items():
        rows[name] = compare(make(), rounds, 3 if q else 5, number)
    rows["lstmcell_loop_f64"] = lstmcell_loop_f64.row(compare, rounds, q)
    rows.update(llama_small.rows(compare, rounds, q))
    for name, mod in (("style_transfer", style_transfer), ("resnet18_32px", resnet18_32px)):
        rows[name] = compare(mod.make_step(), rounds, 1, 1)  # ~2 s a step: 1 sample a round
    flops = sgemm_flops(q)
    mlp_rate = MLP_FLOPS / rows["mlp_step"]["shapeflow"]["median_s"]
    plan = plan_175b()
    peak = attention_peak.measure()
    imports = {m: import_time(m, 3 if q else 7) for m in ("shapeflow", "torch")}

    native = {"blas": gemm.backend(), "kernels": kernels.available(),
              "buffer_cache": buffers.enabled()}
    print(f"shapeflow vs PyTorch {torch.__version__} CPU, 1 thread, {platform.machine()}, "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}; shapeflow's gemm: "
          f"{native['blas']}, compiled kernels: {'on' if native['kernels'] else 'off'}, "
          f"buffer cache: {'on' if native['buffer_cache'] else 'off'}")
    print(f"tinygrad (MLP step only): {NOTES.get('tinygrad', 'not run')}")
    print(f"{'workload':16} {'shapeflow':>12} {'torch':>12} {'numpy':>12} {'tinygrad':>12} "
          f"{'ratio':>7} {'target':>7}  spread sf/torch")
    results = {"date": time.strftime("%Y-%m-%d"), "machine": platform.platform(),
               "cpus": os.cpu_count(), "torch": torch.__version__, "native": native,
               "tinygrad": NOTES.get("tinygrad"),
               "workloads": {}}
    failed = []
    for name, r in rows.items():
        s, t = r["shapeflow"]["median_s"], r["torch"]["median_s"]
        n = r.get("numpy", {}).get("median_s")
        tg = r.get("tinygrad", {}).get("median_s")
        ratio = s / t
        target = TARGETS.get(name)
        mark = "" if target is None else ("ok" if ratio <= target else "MISS")
        if mark == "MISS":
            failed.append(name)
        print(f"{name:16} {_fmt(s):>12} {_fmt(t):>12} {_fmt(n) if n else '':>12} "
              f"{_fmt(tg) if tg else '':>12} {ratio:7.2f} "
              f"{'<=' + str(target) if target else '':>7}  "
              f"{r['shapeflow']['spread']:.0%}/{r['torch']['spread']:.0%} {mark}")
        results["workloads"][name] = {**r, "ratio": ratio, "target": target}
    share = mlp_rate / flops
    print(f"MLP step {mlp_rate / 1e9:.1f} GFLOP/s = {share:.0%} of sgemm "
          f"({flops / 1e9:.1f} GFLOP/s) {'ok' if share >= 0.55 else 'MISS'} (target 55%)")
    if share < 0.55:
        failed.append("mlp_flops")
    print(f"175B GPT-3 plan on meta: {plan['seconds']:.2f} s, "
          f"{plan['max_rss_bytes'] / 2**20:.0f} MiB max RSS, {plan['params'] / 1e9:.1f}B params")
    print(attention_peak.describe(peak))
    print(f"import: shapeflow {imports['shapeflow'] * 1e3:.0f} ms, torch "
          f"{imports['torch'] * 1e3:.0f} ms")
    two = two_ranks(q)
    if two is not None:
        for r in two["allreduce"]:
            print(f"all-reduce {r['bytes']:>9,} B on 2 ranks: shapeflow "
                  f"{r['shapeflow_GBps']:.2f} GB/s, gloo {r['gloo_GBps']:.2f} GB/s, ratio "
                  f"{r['ratio']:.2f}")
        g = two["gpt_ddp"]
        print(f"GPT 2L d128 DDP step, 2 ranks x 1 thread: {_fmt(g['sf_2'])} vs torch DDP "
              f"(gloo) {_fmt(g['torch_2'])}: ratio {g['ddp_ratio']:.2f} (target 1.1); "
              f"throughput x{g['sf_scaling']:.2f} of one rank")
        if g["ddp_ratio"] > 1.1:
            failed.append("gpt_ddp")
    from benchmarks import compile_rows  # sf.compile's rows: eager / compiled / torch.compile

    compiled = compile_rows.rows(q)
    print("\n".join(compile_rows.report(compiled)))
    results["compile"] = compiled
    results["bf16_gemm"] = bf16_gemm.report(q)
    results.update(sgemm_flops=flops, mlp_flops=mlp_rate, plan_175b=plan, import_s=imports,
                   gpt_t512_peak_bytes=peak, quant_gemm=quant_gemm.report(q),
                   two_ranks=two, missed=failed,
                   autocast=autocast_bench.run(compare, rounds, q))
    Path(args.json).write_text(json.dumps(results, indent=2))
    print(f"targets missed: {', '.join(failed)}" if failed else "every target met")
    return 0


def two_ranks(quick: bool) -> dict | None:
    """benchmarks/distributed.py under `mpiexec -n 2` (None where no MPI is installed)."""
    mpiexec = Path(sys.executable).with_name("mpiexec")
    if not mpiexec.exists():
        print("2 ranks: not run (no mpiexec: pip install mpi4py mpich)")
        return None
    cmd = [str(mpiexec), "-n", "2", sys.executable, str(ROOT / "benchmarks" / "distributed.py")]
    out = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True,
                         timeout=900)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def _fmt(s: float) -> str:
    return f"{s * 1e6:.2f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


if __name__ == "__main__":
    sys.exit(main())
