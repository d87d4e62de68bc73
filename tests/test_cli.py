"""The `shapeflow` command: its own options, `python -m shapeflow`, the entry point."""

import importlib
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest


def test_version_says_which_native_parts_run(capsys, monkeypatch):
    from shapeflow import cli
    from shapeflow.backend import kernels

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("shapeflow 0.1.0 (gemm: ")
    assert ("compiled kernels: on" in out) == kernels.available()
    monkeypatch.setattr(kernels, "_state", {"lib": None, "loaded": True, "enabled": False})
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert "compiled kernels: off" in capsys.readouterr().out


def _python_m(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m shapeflow ARGS` in a fresh interpreter (PYTHONPATH inherited)."""
    return subprocess.run([sys.executable, "-m", "shapeflow", *args], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ))


def test_python_m_shapeflow_version_and_a_subcommand():
    done = _python_m("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("shapeflow 0.1.0 (gemm: ")
    done = _python_m("summary", "mlp", "--input", "B,784")
    assert done.returncode == 0, done.stderr
    assert "parameters" in done.stdout and "784" in done.stdout
    done = _python_m("no-such-command")
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_the_console_script_entry_point_resolves_to_main():
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    target = tomllib.loads(pyproject.read_text())["project"]["scripts"]["shapeflow"]
    module, _, attr = target.partition(":")
    from shapeflow.cli import main

    assert getattr(importlib.import_module(module), attr) is main


def test_each_subcommand_lives_in_its_own_module():
    from shapeflow.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        func = parser.get_default("func")
        assert func.__module__ == f"shapeflow.cli.{name}", name


def test_memory_plans_gpt3_175b_quickly():
    """The README's 175B plan: the model is built on meta, so this is seconds, not hours."""
    start = time.perf_counter()
    done = _python_m("memory", "gpt", "--layers", "96", "--d-model", "12288", "--heads", "96",
                     "--seq", "2048", "--batch", "1", "--vocab", "51200", "--dtype", "bf16",
                     "--optimizer", "adamw")
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr
    assert "174.6B weights" in done.stdout and "optimizer state" in done.stdout
    assert elapsed < 20, f"{elapsed:.1f} s (about 1 s on an idle machine)"


def test_summary_and_train_lstm(capsys):
    from shapeflow.cli import main

    assert main(["summary", "lstm"]) == 0
    out = capsys.readouterr().out
    assert "lstm:      [B, L, 256]" in out and "head:      [B, L, 65]" in out
    assert main(["train", "lstm", "--steps", "3", "--batch-size", "2", "--block-size", "8",
                 "--layers", "1", "--hidden", "16", "--sample-tokens", "5"]) == 0
    out = capsys.readouterr().out
    assert "LSTM 1 x 16" in out and "sample:" in out
