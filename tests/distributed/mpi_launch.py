"""Run a script on N MPI ranks (mpiexec from the installed mpich wheel), bounded in time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from shapeflow.cli.run import mpiexec

SRC = Path(__file__).resolve().parents[2] / "src"


def run_ranks(tmp_path: Path, code: str, n: int = 2, timeout: float = 120,
              check: bool = True) -> subprocess.CompletedProcess:
    """`code` run by `n` ranks; its output (each rank's lines prefixed by the script)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([mpiexec(), "-n", str(n), sys.executable, str(script)],
                          capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=tmp_path)
    if check and proc.returncode != 0:
        raise AssertionError(f"ranks failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
