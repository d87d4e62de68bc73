"""`shapeflow compile`: one trace, a plan per bucket, each equal to memory.report's bytes."""

from __future__ import annotations

import re

import shapeflow as sf
from shapeflow import cli
from shapeflow.models import MLP


def test_compile_prints_one_plan_per_bucket_equal_to_the_memory_report(capsys):
    assert cli.main(["compile", "mlp", "--buckets", "B=1,16,256", "--max", "B=256"]) == 0
    out = capsys.readouterr().out
    assert "traced once: 5 ops" in out
    rows = re.findall(r"^B (\d+)\.\.(\d+) +([\d.,]+ \w+)", out, re.M)
    assert [(int(lo), int(hi)) for lo, hi, _ in rows] == [(1, 1), (2, 16), (17, 256)]
    model = MLP(in_features=784, hidden=[256, 256], out_features=10)
    for _, hi, shown in rows:
        rep = sf.memory.report(model, sf.empty(int(hi), 784, device="meta"), mode="inference")
        assert shown == sf.memory.format_bytes(rep.inference_peak - rep.params - rep.inputs)


def test_compile_gpt_default_buckets(capsys):
    assert cli.main(["compile", "gpt", "--input", "B,L", "--max", "B=2", "--max", "L=64"]) == 0
    out = capsys.readouterr().out
    assert "B in [1, 2], L in [1, 64]" in out
    assert "B 2..2, L 33..64" in out and "B 1..1, L 33..64" in out
