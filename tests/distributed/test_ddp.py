"""DistributedDataParallel and ZeRO on 2 ranks give one process's trajectory."""

from __future__ import annotations

import pytest

from tests.distributed.mpi_launch import run_ranks

COMMON = """
    import numpy as np
    import shapeflow as sf
    import shapeflow.distributed as dist
    from shapeflow.distributed.optim import ZeroRedundancyOptimizer
    from shapeflow.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    B = 8

    def make(seed):
        sf.manual_seed(seed)
        return sf.nn.Sequential(sf.nn.Linear(5, 16), sf.nn.Tanh(), sf.nn.Linear(16, 3)).to(
            sf.float64)

    rng = np.random.default_rng(0)
    X = sf.tensor(rng.standard_normal((5, B, 5)))
    Y = sf.tensor(rng.integers(0, 3, (5, B)))

    def loss_of(model, x, y):
        return sf.nn.functional.cross_entropy(model(x), y)

    def reference(opt_class, steps=5, seed=0, **kw):
        model = make(seed)
        opt = opt_class(model.parameters(), **kw)
        for s in range(steps):
            opt.zero_grad()
            loss_of(model, X[s], Y[s]).backward()
            opt.step()
        return [p.detach().numpy() for p in model.parameters()]

    def shard(s):
        per = B // n
        return X[s][r * per:(r + 1) * per], Y[s][r * per:(r + 1) * per]

    def close(ref, model, tol):
        err = max(float(np.abs(a - p.detach().numpy()).max())
                  for a, p in zip(ref, model.parameters()))
        assert err < tol, err
        return err
"""


@pytest.mark.parametrize("optimizer,ranks", [("SGD", 2), ("AdamW", 2), ("AdamW", 4)])
def test_ddp_matches_one_process_with_the_whole_batch(tmp_path, optimizer, ranks):
    kw = "lr=0.1, momentum=0.9" if optimizer == "SGD" else "lr=0.01, weight_decay=0.1"
    out = run_ranks(tmp_path, COMMON + f"""
    model = DDP(make(r + 1), bucket_cap_mb=0.0005)  # other seed: rank 0's weights broadcast
    assert len(model._buckets) > 1
    opt = sf.optim.{optimizer}(model.parameters(), {kw})
    for s in range(5):
        opt.zero_grad()
        loss_of(model, *shard(s)).backward()
        opt.step()
    print("err %g" % close(reference(sf.optim.{optimizer}, seed=1, {kw}), model.module, 1e-10))
    """, n=ranks)
    assert out.stdout.count("err") == ranks


def test_no_sync_accumulates_and_the_next_backward_averages(tmp_path):
    run_ranks(tmp_path, COMMON + """
    model = DDP(make(0))
    opt = sf.optim.SGD(model.parameters(), lr=0.1)
    for s in range(5):
        opt.zero_grad()
        x, y = shard(s)
        half = x.shape[0] // 2
        with model.no_sync():
            (loss_of(model, x[:half], y[:half]) / 2).backward()
        (loss_of(model, x[half:], y[half:]) / 2).backward()
        opt.step()
    close(reference(sf.optim.SGD, lr=0.1), model.module, 1e-10)
    """)


def test_unused_parameters_need_find_unused_parameters(tmp_path):
    run_ranks(tmp_path, COMMON + """
    class TwoHeads(sf.nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.unused = make(0), sf.nn.Linear(3, 3).to(sf.float64)

        def forward(self, x):
            return self.body(x)

    model = DDP(TwoHeads(), find_unused_parameters=True)
    loss_of(model, *shard(0)).backward()
    assert model.module.body[0].weight.grad is not None

    strict = DDP(TwoHeads())
    loss_of(strict, *shard(0)).backward()
    try:
        strict(shard(0)[0])
    except dist.DistributedError as e:
        assert "find_unused_parameters=True" in str(e)
    else:
        raise AssertionError("incomplete reduction not reported")
    """)


@pytest.mark.parametrize("stage,cap", [(1, 25), (2, 25), (2, 0.0005)])
def test_zero_matches_adamw_and_keeps_the_planned_bytes(tmp_path, stage, cap):
    run_ranks(tmp_path, COMMON + f"""
    base = make(r)  # ZeRO (and DDP) start every rank from rank 0's weights
    model = DDP(base) if {stage} == 1 else base  # stage 2 reduce-scatters the gradients itself
    opt = ZeroRedundancyOptimizer(base.parameters(), sf.optim.AdamW, stage={stage},
                                  bucket_cap_mb={cap}, lr=0.01, weight_decay=0.1)
    numel = sum(p.numel() for p in base.parameters())
    plan = sf.memory.report(make(0).to("meta"), sf.empty(B, 5, dtype=sf.float64,
                            device="meta"), optimizer="adamw").plan(devices=n, zero={stage})
    if {stage} == 2:
        assert len(opt._grads.buckets) == (1 if {cap} == 25 else 3), len(opt._grads.buckets)
    for s in range(5):
        opt.zero_grad()
        loss_of(model, *shard(s)).backward()
        if {stage} == 2:  # after backward: this rank's slice of the averaged gradients only
            assert all(p.grad is None for p in base.parameters())
            assert opt.gradient_bytes() == plan.grads == -(-numel // n) * 8, (
                opt.gradient_bytes(), plan.grads)
        opt.step()
    close(reference(sf.optim.AdamW, lr=0.01, weight_decay=0.1), base, 1e-10)
    assert opt.state_bytes() == plan.optimizer_state == -(-numel // n) * 2 * 8, (
        opt.state_bytes(), plan.optimizer_state)

    opt.consolidate_state_dict(to=0)
    if r == 0:
        state = opt.state_dict()["state"]  # per parameter, as PyTorch's
        assert [state[i]["exp_avg"].shape for i in range(4)] == [
            p.shape for p in base.parameters()]
    """)


def test_zero2_accumulates_two_backwards_and_refuses_ddp(tmp_path):
    run_ranks(tmp_path, COMMON + """
    base = make(0)
    opt = ZeroRedundancyOptimizer(base.parameters(), sf.optim.SGD, stage=2,
                                  bucket_cap_mb=0.0005, lr=0.1)
    for s in range(5):
        opt.zero_grad()
        x, y = shard(s)
        half = x.shape[0] // 2
        (loss_of(base, x[:half], y[:half]) / 2).backward()
        (loss_of(base, x[half:], y[half:]) / 2).backward()
        opt.step()
    close(reference(sf.optim.SGD, lr=0.1), base, 1e-10)
    try:
        ZeroRedundancyOptimizer(DDP(make(0)).parameters(), sf.optim.SGD, stage=2, lr=0.1)
    except dist.DistributedError as e:
        assert "DistributedDataParallel" in str(e)
    else:
        raise AssertionError("DDP under stage 2 not refused")

    biases = []  # bfloat16: stage 1 under DDP and stage 2 give the same update
    for stage in (1, 2):
        sf.manual_seed(0)
        lin = sf.nn.Linear(6, 3).to(sf.bfloat16)
        wrapped = DDP(lin) if stage == 1 else lin
        zopt = ZeroRedundancyOptimizer(lin.parameters(), sf.optim.SGD, stage=stage, lr=0.1)
        wrapped(sf.ones(4, 6, dtype=sf.bfloat16) * (r + 1)).float().sum().backward()
        if stage == 2:
            assert zopt.gradient_bytes() == 11 * 2  # ceil(21 / 2) bfloat16 elements
        zopt.step()
        biases.append(lin.bias.float().tolist())
    assert biases[0] == biases[1], biases
    """)


@pytest.mark.parametrize("stage", [1, 2])
def test_rank_zero_saves_a_checkpoint_every_rank_resumes_from(tmp_path, stage):
    run_ranks(tmp_path, COMMON + f"""
    import os

    def train(base, opt, steps):
        model = DDP(base) if {stage} == 1 else base
        for s in steps:
            opt.zero_grad()
            loss_of(model, *shard(s)).backward()
            opt.step()

    def zero(base):
        return ZeroRedundancyOptimizer(base.parameters(), sf.optim.AdamW, stage={stage},
                                       lr=0.01, weight_decay=0.1)

    base = make(0)
    opt = zero(base)
    train(base, opt, range(3))
    opt.consolidate_state_dict(to=0)
    if r == 0:  # one file, written atomically (a temporary renamed over the path)
        sf.save({{"model": base.state_dict(), "optim": opt.state_dict()}}, "ckpt.safetensors")
    dist.barrier()
    assert os.listdir(".").count("ckpt.safetensors") == 1
    ckpt = sf.load("ckpt.safetensors")
    again = make(1)
    again.load_state_dict(ckpt["model"])
    opt2 = zero(again)
    opt2.load_state_dict(ckpt["optim"])
    assert opt2.state_bytes() == opt.state_bytes()
    train(base, opt, range(3, 5))  # the run that went on, and the one resumed from disk
    train(again, opt2, range(3, 5))
    close([p.detach().numpy() for p in base.parameters()], again, 1e-15)  # bit for bit
    close(reference(sf.optim.AdamW, lr=0.01, weight_decay=0.1), again, 1e-10)
    """)
