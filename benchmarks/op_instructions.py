"""Instructions per small op, counted by valgrind's callgrind: a deterministic per-op measure.

Timings of a 2 us op drift 10-30% on these machines; instruction counts do not, so an
A/B of a change to the hot path (apply, record, Tensor._make) reads in one run. Each case
runs in a child process twice, with 0 and N calls, and the difference is divided by N
(imports cancel out). BLAS threads and the hash seed are fixed, or the counts wander.
Needs valgrind (`apt-get install -y valgrind`); not part of `make bench`.

    python benchmarks/op_instructions.py [--calls N] [--torch]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

CASES = {
    "add (4,4), requires grad": "add",
    "matmul (4,4), requires grad": "matmul",
    "add (4,4), under no_grad": "add-no-grad",  # grad mode off: what eval runs
    "matmul+sum backward (4,4)": "backward",  # forward, then backward under grad mode off
    "add (4,4), replayed by sf.compile": "replay",  # per op of a compiled chain of 100 adds
}
REPLAY_CHAIN = 100  # adds per compiled call (the call's fixed cost is shared by them)


def _child(framework: str, op: str, calls: int) -> None:
    """Make two 4x4 leaves that require grad and run the op `calls` times."""
    import numpy as np

    a = np.random.rand(4, 4).astype(np.float32)
    b = np.random.rand(4, 4).astype(np.float32)
    if framework == "torch":
        import torch

        torch.set_num_threads(1)
        x, y = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    else:
        import shapeflow as sf

        x, y = sf.tensor(a, requires_grad=True), sf.tensor(b, requires_grad=True)
    no_grad = torch.no_grad if framework == "torch" else sf.no_grad
    fns = {"add": lambda: x + y, "matmul": lambda: x @ y, "add-no-grad": lambda: x + y,
           "backward": lambda: (x @ y).sum().backward()}
    if op == "replay":
        if framework == "torch":
            return
        def chain(u, v):
            for _ in range(REPLAY_CHAIN):
                u = u + v
            return u

        compiled = sf.compile(chain)
        with sf.no_grad():
            compiled(x, y)  # traced here, in both runs: the difference is the replays
            for _ in range(calls // REPLAY_CHAIN):
                compiled(x, y)
        return
    fn = fns[op]
    if op == "add-no-grad":
        with no_grad():
            for _ in range(calls):
                fn()
        return
    for _ in range(calls):
        fn()


def _instructions(framework: str, op: str, calls: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
           __file__, "--child", framework, op, str(calls)]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected\s*:\s*([\d,]+)", run.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{run.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000, help="calls per case (default 20000)")
    p.add_argument("--torch", action="store_true",
                   help="count PyTorch too (its import under valgrind takes ~2 minutes)")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install -y valgrind)", file=sys.stderr)
        return 1
    frameworks = ["shapeflow"] + (["torch"] if args.torch else [])
    print(f"{'case':34}" + "".join(f"{f:>12}" for f in frameworks) + "  (instructions per call)")
    for label, op in CASES.items():
        counts = []
        for framework in frameworks:
            if op == "replay" and framework == "torch":
                counts.append(None)  # (torch.compile under valgrind: too slow to count)
                continue
            base = _instructions(framework, op, 0)
            counts.append((_instructions(framework, op, args.calls) - base) / args.calls)
        print(f"{label:34}" + "".join("           -" if c is None else f"{c:12,.0f}"
                                      for c in counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
