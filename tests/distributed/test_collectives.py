"""Collectives on 2 ranks against what they must compute."""

from __future__ import annotations

import time

import pytest

from tests.distributed.mpi_launch import run_ranks


def test_collectives_on_two_ranks(tmp_path):
    out = run_ranks(tmp_path, """
        import numpy as np
        import shapeflow as sf
        import shapeflow.distributed as dist

        dist.init_process_group()
        dist.init_process_group()  # idempotent
        r, n = dist.get_rank(), dist.get_world_size()
        assert n == 2 and dist.is_initialized()

        t = sf.tensor([1.0, 2.0, 3.0]) * (r + 1)
        dist.all_reduce(t)
        assert t.tolist() == [3.0, 6.0, 9.0], t
        for op, want in [("avg", [1.5, 3.0]), ("max", [2.0, 4.0]), ("min", [1.0, 2.0]),
                         ("product", [2.0, 8.0])]:
            u = sf.tensor([1.0, 2.0], dtype=sf.float64) * (r + 1)
            dist.all_reduce(u, op=getattr(dist.ReduceOp, op.upper()))
            assert u.tolist() == want, (op, u)
        i = sf.tensor([r + 1, 10], dtype=sf.int64)
        dist.all_reduce(i)
        assert i.tolist() == [3, 20]
        h = sf.tensor([1.5, 2.5], dtype=sf.bfloat16)  # travels as float32
        dist.all_reduce(h)
        assert h.dtype == sf.bfloat16 and h.float().tolist() == [3.0, 5.0]

        hb = sf.full((3,), float(r), dtype=sf.bfloat16)  # copied as bytes: MPI has no bf16
        dist.broadcast(hb, src=1)
        assert hb.float().tolist() == [1.0] * 3
        hr = sf.zeros(1, dtype=sf.bfloat16)  # summed as float32
        dist.reduce_scatter_tensor(hr, sf.tensor([1.5, 2.5], dtype=sf.bfloat16))
        assert hr.float().tolist() == ([3.0] if r == 0 else [5.0]), hr

        b = sf.full((2, 2), float(r))
        dist.broadcast(b, src=1)
        assert b.tolist() == [[1.0, 1.0], [1.0, 1.0]]

        outs = [sf.zeros(3) for _ in range(n)]
        dist.all_gather(outs, sf.full((3,), float(r)))
        assert [o.tolist() for o in outs] == [[0.0] * 3, [1.0] * 3]
        big = sf.zeros(4, 3)
        dist.all_gather_into_tensor(big, sf.full((2, 3), float(r)))
        assert big[:, 0].tolist() == [0.0, 0.0, 1.0, 1.0]

        rs = sf.zeros(2)
        dist.reduce_scatter_tensor(rs, sf.arange(4, dtype=sf.float32) * (r + 1))
        assert rs.tolist() == ([0.0, 3.0] if r == 0 else [6.0, 9.0]), rs

        gl = [sf.zeros(2) for _ in range(n)] if r == 0 else None
        dist.gather(sf.full((2,), r + 5.0), gl, dst=0)
        if r == 0:
            assert [g.tolist() for g in gl] == [[5.0, 5.0], [6.0, 6.0]]
        got = sf.zeros(2)
        dist.scatter(got, [sf.full((2,), 7.0), sf.full((2,), 8.0)] if r == 0 else None, src=0)
        assert got.tolist() == [7.0 + r] * 2

        w = sf.ones(5)
        work = dist.all_reduce(w, async_op=True)
        work.wait()
        assert w.tolist() == [2.0] * 5 and work.is_completed()
        outs, mine, c = sf.zeros(4), sf.full((2,), float(r)), sf.full((2, 2), r + 5.0)
        works = [dist.all_gather_into_tensor(outs, mine, async_op=True),
                 dist.reduce_scatter_tensor(rs, sf.arange(4, dtype=sf.float32), async_op=True),
                 dist.broadcast(c, src=0, async_op=True)]
        for wk in works:  # several in flight, waited in turn
            wk.wait()
        assert outs.tolist() == [0.0, 0.0, 1.0, 1.0] and c.tolist() == [[5.0] * 2] * 2
        assert rs.tolist() == ([0.0, 2.0] if r == 0 else [4.0, 6.0]), rs

        view = sf.ones(4, 4)[:, 1]  # not contiguous: reduced through a copy, written back
        dist.all_reduce(view)
        assert view.tolist() == [2.0] * 4

        try:  # shapes that differ across ranks: an error on every rank, not a hang
            dist.all_reduce(sf.ones(3 + r))
        except sf.ShapeError as e:
            assert "different shapes" in str(e), e
        else:
            raise AssertionError("mismatch not caught")
        try:  # the same for a reduce-scatter, whose input sizes differ by rank
            dist.reduce_scatter_tensor(sf.zeros(2), sf.ones(4, 1 + r))
        except sf.ShapeError as e:
            assert "reduce_scatter_tensor" in str(e), e
        else:
            raise AssertionError("mismatch not caught")
        try:  # a tensor only one rank cannot send: that rank's error, a ShapeError elsewhere
            dist.all_reduce(sf.ones(2, device="meta" if r == 0 else "cpu"))
        except (sf.DeviceError if r == 0 else sf.ShapeError) as e:
            assert r == 0 or "rank(s) [0] rejected" in str(e), e
        else:
            raise AssertionError("one-sided error not shared")
        dist.barrier()
        print(f"rank {r} ok")
    """)
    assert "rank 0 ok" in out.stdout and "rank 1 ok" in out.stdout


def test_an_exception_on_one_rank_aborts_all_ranks_quickly(tmp_path):
    proc = run_ranks(tmp_path, """
        import time
        import shapeflow as sf
        import shapeflow.distributed as dist

        dist.init_process_group()
        if dist.get_rank() == 1:
            print(f"raised at {time.time()}", flush=True)
            raise ValueError("boom on rank one")
        dist.all_reduce(sf.ones(3))  # rank 0 would wait here forever without the abort
        time.sleep(60)
    """, timeout=60, check=False)
    ended = time.time()
    assert proc.returncode != 0
    assert "[rank 1]" in proc.stderr and "boom on rank one" in proc.stderr
    raised = float(proc.stdout.split("raised at ")[1].split()[0])
    assert ended - raised < 10, ended - raised  # every rank gone within seconds


def test_without_mpiexec_a_process_is_a_world_of_one():
    import shapeflow as sf
    import shapeflow.distributed as dist

    dist.destroy_process_group()  # (the README's tour, run in this process, may have joined)
    assert dist.get_world_size() == 1 and dist.get_rank() == 0
    with pytest.raises(dist.DistributedError, match="not initialized"):
        dist.all_reduce(sf.ones(2))
    with pytest.raises(dist.DistributedError, match="backend 'nccl'"):
        dist.init_process_group("nccl")
    assert isinstance(dist.DistributedError("x"), RuntimeError)


def test_shapeflow_run_and_train_gpt_on_two_ranks(tmp_path):
    import subprocess
    import sys

    from shapeflow.cli.train import load_gpt

    script = tmp_path / "hello.py"
    script.write_text("import shapeflow.distributed as dist\ndist.init_process_group()\n"
                      "print(f'hello from {dist.get_rank()} of {dist.get_world_size()}')\n")
    out = subprocess.run([sys.executable, "-m", "shapeflow", "run", "-n", "2", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "hello from 0 of 2" in out.stdout and "hello from 1 of 2" in out.stdout
    out = subprocess.run([sys.executable, "-m", "shapeflow", "train", "gpt", "--steps", "3",
                          "--layers", "1", "--d-model", "16", "--heads", "2",
                          "--sample-tokens", "5", "--nproc", "2", "--save", "two.safetensors"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "2 ranks x batch 16" in " ".join(out.stdout.split())
    assert out.stdout.count("sample:") == 1
    model, _ = load_gpt(str(tmp_path / "two.safetensors"))  # one file, plain keys, by rank 0
    assert model.lm_head.weight.shape[1] == 16


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 2, False), (11, 2, False),
                                                  (11, 3, True), (5, 4, False)])
def test_distributed_sampler_splits_one_order_among_ranks(n, replicas, drop_last):
    import torch.utils.data as tud

    import shapeflow as sf

    data = list(range(n))
    shares = [list(sf.data.DistributedSampler(data, replicas, r, seed=3, drop_last=drop_last))
              for r in range(replicas)]
    torch_lens = [len(tud.DistributedSampler(data, replicas, r, drop_last=drop_last))
                  for r in range(replicas)]
    assert [len(s) for s in shares] == torch_lens  # PyTorch's counts and padding rule
    seen = [i for s in shares for i in s]
    if drop_last:
        assert len(set(seen)) == len(seen) == n // replicas * replicas
    else:
        assert set(seen) == set(data)
    again = sf.data.DistributedSampler(data, replicas, 0, seed=3, drop_last=drop_last)
    assert list(again) == shares[0]  # a function of seed and epoch only
    again.set_epoch(1)
    assert list(again) != shares[0] or n < 4
    plain = sf.data.DistributedSampler(data, replicas, 1, shuffle=False, drop_last=drop_last)
    assert list(plain) == list(tud.DistributedSampler(data, replicas, 1, shuffle=False,
                                                      drop_last=drop_last))
    with pytest.raises(ValueError, match="Invalid rank"):
        sf.data.DistributedSampler(data, 2, 2)
