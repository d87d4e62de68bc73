"""Data-parallel plans on meta: DDP's buckets, ZeRO's flat padded parameters, symbolic sizes.
(tests/distributed/test_memory_plans.py checks them against each rank's tracemalloc.)"""

import pytest

import shapeflow as sf
from shapeflow.inspect.memory import report
from shapeflow.models import GPT
from shapeflow.tensor import PostAccumulateHook


def gpt_report(batch):
    model = GPT(97, 32, 2, 4, 64, device="meta")
    idx = sf.empty(batch, 32, dtype=sf.int64, device="meta")
    return report(model, idx, idx, optimizer="adamw")


def test_one_device_plans_the_reports_peak_and_ddp_adds_its_buckets():
    rep = gpt_report(2)
    numel = rep.param_count
    assert rep.plan(devices=1).peak == rep.peak
    ddp = rep.plan(devices=2)
    assert ddp.comm_buffers == 4 * numel  # one float32 bucket slot per gradient
    assert ddp.peak == rep.peak + ddp.comm_buffers
    assert ddp.baseline == rep.baseline + ddp.comm_buffers


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_holds_a_padded_flat_buffer_and_less_at_its_peak(zero):
    rep = gpt_report(2)
    numel, d = rep.param_count, 3  # 3 does not divide numel: the flat buffer is padded
    assert numel % d
    plan = rep.plan(devices=d, zero=zero)
    assert plan.params == -(-numel // d) * d * 4
    assert plan.optimizer_state == -(-numel // d) * 2 * 4
    assert plan.comm_buffers == (4 * numel if zero == 1 else 0)  # stage 2 needs no DDP
    assert plan.peak < rep.plan(devices=d, zero=zero - 1).peak


def test_zero2_buckets_move_the_peak_and_symbolic_plans_agree():
    registered = PostAccumulateHook.registered
    sym, concrete = gpt_report("B"), gpt_report(2)
    for zero in (0, 1, 2):
        for cap in (25, 0.05):
            want = concrete.plan(devices=4, zero=zero, bucket_cap_mb=cap).peak
            assert sym.subs(B=2).plan(devices=4, zero=zero, bucket_cap_mb=cap).peak == want
            assert sym.plan(devices=4, zero=zero, bucket_cap_mb=cap).peak.subs(B=2) == want
    # the plan's hooks are gone: plain backward does not start watching leaves
    assert PostAccumulateHook.registered == registered
    one, many = (concrete.plan(devices=4, zero=2, bucket_cap_mb=c).peak for c in (25, 0.05))
    assert one != many
    assert "peak of the step" in str(concrete.plan(devices=4, zero=2))


def test_no_data_parallel_peak_for_inference_or_tensor_parallel():
    model = GPT(97, 32, 2, 4, 64, device="meta")
    idx = sf.empty(2, 32, dtype=sf.int64, device="meta")
    assert report(model, idx, idx, mode="inference").plan(devices=2).peak is None
    assert gpt_report(2).plan(devices=4, tensor_parallel=2).peak is None
