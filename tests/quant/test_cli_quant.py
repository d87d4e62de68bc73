"""`shapeflow quant MODEL --scheme S [--checkpoint FILE] [--budget-db X]` through the CLI."""

import re

import pytest

import shapeflow as sf
from shapeflow.cli import main


def test_quant_mlp_trained_here_with_a_budget(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["quant", "mlp", "--epochs", "2", "--budget-db", "60"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no --checkpoint: a digits MLP trained here for 2 epochs (seed 0)")
    for name in ("net.0", "net.2", "net.4", "(output)"):
        assert name in out
    assert re.search(r"accuracy \d+\.\d+% float -> \d+\.\d+% quantized", out)
    found = re.search(r"to reach 60 dB keep float: (.*); output SQNR (\S+) dB \(verified by a "
                      r"re-run\), which meets the budget", out.replace("\n", " "))
    assert found, out


def test_quant_vit_from_a_checkpoint_and_a_plot(capsys, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("COLUMNS", "160")
    from shapeflow.cli.demo import DEMO_VIT

    sf.manual_seed(3)
    vit = sf.models.ViT(**DEMO_VIT)
    path = tmp_path / "vit.safetensors"
    sf.save(vit.state_dict(), path)
    plot = tmp_path / "sqnr.png"
    assert main(["quant", "vit", "--checkpoint", str(path), "--scheme", "int4-g32",
                 "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"vit from {path}")
    assert "blocks.1.mlp.3" in out and "scheme 'int4-g32'" in out
    # the patch projection has 4 inputs: no group of 32, so it stays float and is named
    assert "left float (the scheme cannot store them): project (4 inputs" in out
    assert plot.stat().st_size > 0


def test_quant_gpt_from_a_trained_checkpoint_reports_the_loss_change(capsys, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    path = tmp_path / "gpt.safetensors"
    assert main(["train", "gpt", "--steps", "2", "--batch-size", "2", "--block-size", "16",
                 "--layers", "1", "--d-model", "32", "--heads", "2", "--sample-tokens", "2",
                 "--val-batches", "1", "--save", str(path)]) == 0
    capsys.readouterr()
    assert main(["quant", "gpt", "--checkpoint", str(path), "--scheme", "fp8-e4m3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"gpt from {path}")
    assert "transformer.h.0.attn.c_attn" in out and "lm_head" in out
    assert re.search(r"loss \d+\.\d+ -> \d+\.\d+ \([+-]\d+\.\d+\), perplexity", out)


def test_quant_gpt_without_a_checkpoint_says_its_weights_are_random(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["quant", "gpt", "--scheme", "int8-weight"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("no --checkpoint: a GPT with random weights")
