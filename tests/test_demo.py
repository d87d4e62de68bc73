"""The README's first command: the demo trains a ViT to >= 95% and round-trips a checkpoint."""

from shapeflow.cli import main
from shapeflow.cli.demo import run_demo


def test_demo_reaches_95_percent_and_reloads(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "vit.safetensors")]) == 0
    out = capsys.readouterr().out
    assert "image:" in out and "patchify:" in out and "head:" in out
    assert "the same" in out
    assert run_demo.last_accuracy >= 0.95
    assert (tmp_path / "vit.safetensors").exists()

