"""Collectives whose ranks disagree: the same error on every rank before any data moves, and
the group still usable after it (and no false alarm from a rank that ends first); a
DistributedSampler built before the group exists."""

from __future__ import annotations

import pytest

from tests.distributed.mpi_launch import run_ranks


def test_mismatched_arguments_raise_alike_on_every_rank_and_the_group_stays_usable(tmp_path):
    out = run_ranks(tmp_path, """
        import time

        import shapeflow as sf
        import shapeflow.distributed as dist

        dist.init_process_group()
        r = dist.get_rank()

        def refused(call, error, *words):
            try:
                call()
            except sf.ShapeflowError as e:
                assert type(e) is error, (type(e), e)
                for word in words:
                    assert word in str(e), (word, e)
            else:
                raise AssertionError(f"rank {r}: not refused")

        def works():  # every later correct collective still runs on every rank
            t = sf.ones(1, 1, 1, 1, 2)
            dist.all_reduce(t)
            assert t.flatten().tolist() == [2.0, 2.0], t
            u = sf.full((3,), float(r), dtype=sf.int32 if r else sf.float32).float()
            dist.all_reduce(u)
            assert u.tolist() == [1.0] * 3, u

        # the first collective of this process: float32 on rank 0, int32 on rank 1
        refused(lambda: dist.all_reduce(sf.ones(3, dtype=sf.int32 if r else sf.float32)),
                sf.DTypeError, "float32", "int32", "all_reduce")
        works()
        # shapes that differ in the 5th dim only, in the 10th of 10 dims, in the count of dims
        for shape in [(1, 1, 1, 1, 2 + r), (1,) * 9 + (2 + r,), (2,) * (3 + r)]:
            refused(lambda: dist.all_reduce(sf.ones(*shape)), sf.ShapeError, "all_reduce",
                    "rank 0", "rank 1")
            works()
        refused(lambda: dist.broadcast(sf.ones(2, 3, 4, 5, 6 + r, 2), src=0), sf.ShapeError,
                "broadcast")
        refused(lambda: dist.all_gather_into_tensor(
            sf.zeros(2, 3, dtype=sf.float64 if r else sf.float32),
            sf.ones(3, dtype=sf.float64 if r else sf.float32)), sf.DTypeError, "float64")
        works()
        print(f"rank {r} ok", flush=True)
        # no false alarm: rank 1 exits right after its part of the last collective, while
        # rank 0 only waits for it 1.5 s later (the job still ends well)
        done = sf.ones(2)
        work = dist.all_reduce(done, async_op=True)
        if r == 0:
            time.sleep(1.5)
        work.wait()
        assert done.tolist() == [2.0, 2.0], done
    """, timeout=60)
    assert "rank 0 ok" in out.stdout and "rank 1 ok" in out.stdout


def test_a_distributed_sampler_built_before_init_process_group_is_refused(monkeypatch):
    import shapeflow as sf
    import shapeflow.distributed as dist

    dist.destroy_process_group()
    monkeypatch.setenv("PMI_SIZE", "2")  # as mpiexec -n 2 sets it for each of its ranks
    with pytest.raises(dist.DistributedError, match="init_process_group"):
        sf.data.DistributedSampler(list(range(10)))  # it would give this rank all 10
    assert len(sf.data.DistributedSampler(list(range(10)), 2, 1)) == 5  # explicit: fine
    monkeypatch.delenv("PMI_SIZE")
    assert len(sf.data.DistributedSampler(list(range(10)))) == 10  # a world of one
