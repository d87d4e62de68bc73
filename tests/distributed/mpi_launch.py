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
    with subprocess.Popen([mpiexec(), "-n", str(n), sys.executable, str(script)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=tmp_path) as popen:
        try:
            out, err = popen.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # SIGTERM: mpiexec then ends its ranks (which run in sessions of their own, so a
            # SIGKILL of mpiexec alone would leave them spinning)
            popen.terminate()
            try:
                out, err = popen.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                popen.kill()
                out, err = popen.communicate()
            raise subprocess.TimeoutExpired(popen.args, timeout, out, err) from None
    proc = subprocess.CompletedProcess(popen.args, popen.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(f"ranks failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc
