"""The catalogue of distributed faults: a rank that leaves, sleeps or never joins, each run on
2 ranks under mpiexec. The other rank must raise DistributedError within seconds, naming the
rank that left (or the timeout) and the collective it was in, and the job must end non-zero.

Each case is a script: the faulty rank prints `FAULT <time>` when it goes wrong; the other
prints `RAISED <time> <error>` when its call raises, then re-raises (uncaught: every rank
is aborted).
"""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.distributed.mpi_launch import run_ranks

HEAD = """
    import sys, time
    import shapeflow as sf
    import shapeflow.distributed as dist

    def fault():
        print(f"FAULT {time.time()}", flush=True)

    def raised(e):
        print(f"RAISED {time.time()} {type(e).__name__}: {' '.join(str(e).split())}",
              flush=True)
"""



def script(code: str) -> str:
    """The helpers, then the case's code."""
    return textwrap.dedent(HEAD) + textwrap.dedent(code)


# name: (script, seconds from FAULT to RAISED: at least, at most; words the error names)
CASES = {
    "rank 1 exits (sys.exit(0)) while rank 0 is in all_reduce": ("""
        dist.init_process_group()
        if dist.get_rank() == 1:
            fault()
            sys.exit(0)
        try:
            dist.all_reduce(sf.ones(3))
        except dist.DistributedError as e:
            raised(e)
            raise
    """, 0, 10, ["rank 1", "all_reduce", "exited"]),

    "uneven batches under DDP: rank 1 has one batch fewer": ("""
        from shapeflow.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group()
        r = dist.get_rank()
        model = DDP(sf.nn.Linear(4, 2))
        opt = sf.optim.SGD(model.parameters(), lr=0.1)
        try:
            for step in range(3 if r == 0 else 2):
                opt.zero_grad()
                model(sf.randn(2, 4)).sum().backward()
                opt.step()
        except dist.DistributedError as e:
            raised(e)
            raise
        fault()  # rank 1's data ran out: it returns from the script
    """, 0, 10, ["rank 1", "DistributedDataParallel", "exited"]),

    "uneven batches under ZeRO stage 2: rank 1 has one batch fewer": ("""
        from shapeflow.distributed.optim import ZeroRedundancyOptimizer

        dist.init_process_group()
        r = dist.get_rank()
        model = sf.nn.Linear(4, 2)
        opt = ZeroRedundancyOptimizer(model.parameters(), sf.optim.SGD, stage=2, lr=0.1)
        try:
            for step in range(3 if r == 0 else 2):
                opt.zero_grad()
                model(sf.randn(2, 4)).sum().backward()
                opt.step()
        except dist.DistributedError as e:
            raised(e)
            raise
        fault()
    """, 0, 10, ["rank 1", "ZeroRedundancyOptimizer", "exited"]),

    "rank 1 fails before init_process_group": ("""
        if __import__("os").environ["PMI_RANK"] == "1":
            fault()
            raise ValueError("bad config on rank 1")
        try:
            dist.init_process_group()
        except dist.DistributedError as e:
            raised(e)
            raise
    """, 0, 10, ["rank 1", "init_process_group"]),

    # rank 1 reaches init 1.5 s late (waited for, not an error), then sleeps in the loop:
    # rank 0's all_reduce gives up after the group's timeout of 3 s, not 30 minutes
    "timeout=3 s and a rank that sleeps 30 s": ("""
        from datetime import timedelta

        if __import__("os").environ["PMI_RANK"] == "1":
            time.sleep(1.5)
        dist.init_process_group(timeout=timedelta(seconds=3))
        if dist.get_rank() == 1:
            time.sleep(30)
        fault()  # rank 0 enters the all_reduce now
        try:
            dist.all_reduce(sf.ones(3))
        except dist.DistributedError as e:
            raised(e)
            raise
    """, 2.9, 6.5, ["timed out", "0:00:03", "rank 1", "all_reduce"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_fault_on_one_rank_raises_on_the_other_and_ends_the_job(tmp_path, name):
    code, least, most, words = CASES[name]
    proc = run_ranks(tmp_path, script(code), timeout=60, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    faults = re.findall(r"FAULT (\S+)", proc.stdout)
    errors = re.findall(r"RAISED (\S+) (.*)", proc.stdout)
    assert len(faults) == 1 and len(errors) == 1, out
    delay = float(errors[0][0]) - float(faults[0])
    assert least <= delay <= most, (delay, out)
    message = errors[0][1]
    assert message.startswith("DistributedError"), message
    for word in words:
        assert word in message, (word, message)
