"""Peak memory of the GPT training step at T = 512 (4 layers, d 256, 4 heads, batch 4, AdamW).

Each figure is the most memory allocated at once during one step (forward, backward,
optimizer step), above what was allocated before it, after one warm-up step (so AdamW's
state exists). Each runs in a fresh process, one thread:
- shapeflow: tracemalloc's peak (NumPy reports every array buffer to it), with the flash
  and the math attention kernel, beside the plan's figures (`sf.memory.report`) for both.
- PyTorch: its CPU allocator does not go through tracemalloc, so torch.profiler's memory
  timeline (profile_memory=True, export_memory_timeline on "cpu"): the bytes of live
  tensors after each allocation and free, summed over its categories, whose first entry
  is what existed before the step.
`python benchmarks/attention_peak.py` prints the table; run.py calls `measure()`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CFG = dict(vocab_size=65, block_size=512, n_layer=4, n_head=4, n_embd=256)
B, T = 4, 512


def _setup():
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.integers(0, 65, (B, T)), rng.integers(0, 65, (B, T))


def shapeflow_peak(kernel: str) -> dict:
    """tracemalloc's peak of one step above before it; the plan's activations and peak."""
    import gc
    import tracemalloc

    import shapeflow as sf
    from shapeflow.models import GPT
    from shapeflow.nn.attention import sdpa_kernel

    ia, ta = _setup()
    sf.manual_seed(0)
    model = GPT(**CFG)
    opt = sf.optim.AdamW(model.parameters(), lr=1e-3)
    idx, tgt = sf.tensor(ia), sf.tensor(ta)

    def step():
        with sdpa_kernel(kernel):
            _, loss = model(idx, tgt)
            loss.backward()
        opt.step()
        opt.zero_grad()

    step()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        step()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    plan = sf.memory.report(model, idx, tgt, optimizer="adamw", attention=kernel)
    return {"peak": peak, "plan_activations": int(plan.activations),
            "plan_step_peak": int(plan.peak - plan.baseline)}


def torch_peak() -> dict:
    """The peak of torch.profiler's memory timeline over one step, above its start."""
    import tempfile
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.path.insert(0, str(ROOT))
    from tests.models.twins import TorchGPT

    torch.set_num_threads(1)
    torch.manual_seed(0)
    ia, ta = _setup()
    model = TorchGPT(**CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    idx, tgt = torch.tensor(ia), torch.tensor(ta)

    def step():
        _, loss = model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad()

    step()
    held = sum(t.nbytes for t in [*model.parameters(), idx, tgt] + [
        v for st in opt.state.values() for v in st.values() if torch.is_tensor(v)])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated, still the CPU timeline
        prof.export_memory_timeline(f"{tmp}/t.json", device="cpu")
        with open(f"{tmp}/t.json") as f:
            _, sizes = json.load(f)
    total = [sum(s) for s in sizes]  # bytes live after each event, by category, summed
    # the timeline starts with the tensors that existed before the step (parameters,
    # AdamW's state, the batch): the step's peak is measured above that
    return {"peak": max(total) - total[0], "start": total[0], "held": held}


def _child(what: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, __file__, "--child", what], capture_output=True,
                         text=True, check=True, env=env, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure() -> dict:
    """{'flash': ..., 'math': ..., 'torch': ...}, each measured in a fresh process."""
    return {k: _child(k) for k in ("flash", "math", "torch")}


def describe(r: dict) -> str:
    mib = 2**20
    f, m, t = r["flash"], r["math"], r["torch"]
    return (f"GPT 4L d256 T=512 b4 step peak above resting: shapeflow {f['peak'] / mib:.1f} MiB "
            f"with flash (plan: {f['plan_step_peak'] / mib:.1f}, activations "
            f"{f['plan_activations'] / mib:.1f}), {m['peak'] / mib:.1f} MiB with math (plan: "
            f"{m['plan_step_peak'] / mib:.1f}, activations {m['plan_activations'] / mib:.1f}); "
            f"PyTorch {t['peak'] / mib:.1f} MiB (profiler); "
            f"ratio {f['peak'] / t['peak']:.2f} (tracemalloc vs profiler)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        what = sys.argv[2]
        print(json.dumps(torch_peak() if what == "torch" else shapeflow_peak(what)))
    else:
        print(describe(measure()))
