"""`shapeflow run -n N script.py [args]`: run a script on N MPI ranks (mpiexec, from the
installed MPI wheel), with one math thread per rank so N ranks share the cores fairly."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import ShapeflowError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `run` subcommand."""
    r = subparsers.add_parser("run", help="run a Python script on N processes (MPI)")
    r.add_argument("-n", "--nproc", type=int, default=2, help="number of ranks (default 2)")
    r.add_argument("script", help="the script to run on every rank")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    r.set_defaults(func=run)


def mpiexec() -> str:
    """The mpiexec next to this Python (the mpich wheel puts it there), else on PATH."""
    here = Path(sys.executable).with_name("mpiexec")
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec")
    if found is None:
        raise ShapeflowError("no mpiexec found next to this Python or on PATH",
                             hint="pip install mpi4py mpich")
    return found


def launch(nproc: int, argv: list[str]) -> int:
    """Run `argv` (a Python command line) on `nproc` ranks; the exit status."""
    if nproc < 1:
        raise ShapeflowError(f"run: -n must be at least 1, got {nproc}",
                             hint="-n is the number of processes (ranks), e.g. -n 2")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS", "1"),
           "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    return subprocess.call([mpiexec(), "-n", str(nproc), *argv], env=env)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow run`; the exit status of the ranks."""
    if not Path(args.script).exists():
        raise ShapeflowError(f"run: no such script: {args.script}",
                             hint="shapeflow run -n 2 path/to/train.py [its arguments]")
    return launch(args.nproc, [sys.executable, args.script, *args.args])
