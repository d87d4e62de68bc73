"""What a newcomer meets with the README alone: every bundled model in every command that
takes one, tables that fit 80 columns without cutting a number, --save in every training
command, and a validation loss from `train lstm`."""

import re

import pytest

import shapeflow as sf
from shapeflow.cli import main
from shapeflow.models.registry import DEFAULTS, build_model

MODEL_COMMANDS = ["summary", "memory", "graph", "compile"]


@pytest.mark.parametrize("model", sorted(DEFAULTS))
@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_every_bundled_model_runs_in_every_model_command(command, model, capsys):
    # gpt and lstm take token ids: they are traced with int64 inputs, not float32
    assert main([command, model]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    kind = DEFAULTS[model][0]
    assert {"summary": f"{kind} summary", "memory": f"{kind}, training step",
            "graph": "digraph", "compile": "traced once"}[command] in out


def test_the_model_commands_are_all_tested():
    from shapeflow.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    takes_a_model = {name for name, p in sub.choices.items()
                     if any(a.dest == "model" and a.choices is None for a in p._actions)}
    assert takes_a_model == {*MODEL_COMMANDS, "quant"}  # quant: its own models, tested below


# ---- tables at 60, 80 and 100 columns -------------------------------------------------------
def _table_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]


def _header(out: str) -> str:
    return " ".join(line for line in out.splitlines() if line.startswith("┃"))


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_summary_keeps_every_number_whole(columns, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["summary", "resnet"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert all(len(line) <= columns for line in _table_lines(out))
    assert "output" in _header(out) and "params" in _header(out)
    if columns >= 100:
        assert "input" in _header(out)
    else:
        assert f"(not shown at {columns} columns: input" in out
    model = build_model("resnet", device="meta")
    rows = {}
    for line in _table_lines(out):
        cells = [c.strip() for c in line.strip("│").split("│")]
        rows.setdefault(cells[0], cells)
    total = sum(p.numel() for p in model.parameters())
    assert f"{total:,}" in rows["(model)"]
    for name, child in model.named_children():
        assert f"{sum(p.numel() for p in child.parameters()):,}" in rows[name], name


@pytest.mark.parametrize("columns", [60, 80, 100])
def test_quant_keeps_every_number_whole(columns, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(["quant", "mlp", "--epochs", "1"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out
    assert all(len(line) <= columns for line in _table_lines(out))
    assert "own" in _header(out) and "propagated" in _header(out)
    output_row = next(line for line in _table_lines(out) if "(output)" in line)
    sqnr = re.search(r"output SQNR (\S+) dB", out).group(1)
    assert sqnr in [c.strip() for c in output_row.split("│")]


# ---- training: --save writes a checkpoint that loads back -------------------------------------
def test_train_resnet_saves_a_checkpoint_that_loads_back(tmp_path, capsys):
    from shapeflow.cli.train_resnet import evaluate, load_resnet
    from shapeflow.data.datasets import digits

    path = tmp_path / "resnet.safetensors"
    assert main(["train", "resnet", "--epochs", "1", "--batch-size", "128", "--width", "4",
                 "--save", str(path)]) == 0
    out = capsys.readouterr().out
    reported = re.search(r"test accuracy ([0-9.]+%)", out).group(1)
    model = load_resnet(str(path))
    assert f"{evaluate(model, digits('test')):.1%}" == reported  # BatchNorm's statistics too
    assert sf.load(str(path))["epochs"] == 1


def test_train_lstm_reports_a_validation_loss_and_saves(tmp_path, capsys):
    from shapeflow.cli.train import validation_loss
    from shapeflow.cli.train_lstm import load_lstm
    from shapeflow.data.datasets import CharDataset, text_corpus

    path = tmp_path / "lstm.safetensors"
    assert main(["train", "lstm", "--steps", "2", "--batch-size", "2", "--block-size", "8",
                 "--layers", "1", "--hidden", "8", "--sample-tokens", "5", "--val-batches", "2",
                 "--save", str(path)]) == 0
    out = capsys.readouterr().out
    val = float(out.split("validation loss ")[1].split()[0])
    assert 3.0 < val < 5.0  # ln(76) = 4.33 for a model that has learned nothing yet
    model, vocab = load_lstm(str(path))
    data = CharDataset(text_corpus(), 8)
    assert vocab == "".join(data.vocab)
    assert f"validation loss {validation_loss(model, data.val_ids, 2, 8, 2):.3f}" in out

