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



def test_demo_fits_80_columns_and_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp would leave it
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["demo", "--epochs", "1"]) == 0
    out = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    assert "temporary file (--out PATH keeps it)" in out and "the same" in out
    assert "nan" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "ViT, training step: fp32, optimizer adamw" in out and "by module" in out
