"""The `shapeflow` command: its own options, `python -m shapeflow`, the entry point."""

import importlib
import itertools
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest


def test_version_says_which_native_parts_run(capsys, monkeypatch):
    from shapeflow import cli
    from shapeflow.backend.cpu import kernels

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


def test_python_m_shapeflow_version_verbose_lists_libraries_and_kernel_calls():
    done = _python_m("--version", "--verbose")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("shapeflow 0.1.0 (gemm: ")
    assert "\nlibraries:\n  mkl: " in done.stdout
    assert "kernel calls in this process: none yet" in done.stdout  # a fresh process


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
# ---- a user's mistakes: a shapeflow error and its hint, exit status 2, no traceback ---------
BAD_COMMANDS = [
    (["ops", "--family", "nope"], "ShapeflowError: no family 'nope'"),
    (["demo", "--epochs", "0"], "ShapeflowError: --epochs must be at least 1"),
    (["train", "gpt", "--steps", "0"], "ShapeflowError: --steps must be at least 1"),
    (["train", "gpt", "--heads", "5", "--steps", "1"], "ShapeError: GPT: n_embd 128 is not"),
    (["summary", "no-such-model"], "ShapeflowError: unknown model 'no-such-model'"),
    (["summary", "vit", "--input", "B,3,x-"], "ShapeError: cannot parse dim 'x-'"),
    (["summary", "vit", "--dtype", "fp99"], "DTypeError: unknown dtype 'fp99'"),
    (["summary", "shapeflow.cli.graph:figure2"], "ShapeflowError: --input is needed"),
    (["summary", "mlp", "--input", "B,3", "--dtype", "int64"], "DTypeError"),
    (["graph", "vit", "--input", "B,3,32"], "ShapeError: patchify expects an image batch"),
    (["graph", "vit", "-o", "/no/such/folder/vit.svg"], "ShapeflowError: cannot write"),
    (["graph", "no.such.module:factory", "--input", "B,3"],
     "ShapeflowError: cannot load model factory"),
    (["memory", "gpt", "--heads", "5", "--layers", "1"], "ShapeError: GPT: n_embd 768"),
    (["memory", "gpt", "--seq", "0"], "ShapeflowError: --seq must be at least 1"),
    (["memory", "vit", "--optimizer", "lion"], "MemoryPlanError: memory.report: unknown"),
    (["memory", "gpt", "--layers", "1", "--devices", "3", "--tensor-parallel", "2"],
     "MemoryPlanError: memory plan: 3 devices"),
    (["run", "no_such_script.py"], "ShapeflowError: run: no such script: no_such_script.py"),
    (["compile", "gpt", "--dynamic", "Q"], "ShapeflowError: --dynamic names Q, which --input"),
    (["compile", "mlp", "--buckets", "B=x"], "ShapeflowError: --buckets: expected NAME=N"),
    (["quant", "resnet"], "ShapeflowError: quant: unknown model 'resnet'"),
    (["quant", "vit", "--scheme", "int3"], "QuantError: quantize: unknown scheme 'int3'"),
    (["quant", "gpt", "--checkpoint", "no_such.safetensors"], "CheckpointError"),
    (["bench", "serve", "--goodput", "ttfx:5"], "ShapeflowError: bench: --goodput takes"),
    (["serve", "no_such.sf"], "CheckpointError: no_such.sf: no such file or directory"),
    (["serve", "x.sf", "--max-prefill-tokens-per-step", "0"],
     "ShapeflowError: --max-prefill-tokens-per-step must be at least 1, got 0"),
    (["serve", "x.sf", "--prefill-latency-budget", "0"],
     "ShapeflowError: --prefill-latency-budget must be above 0, got 0.0"),
]


@pytest.mark.parametrize("argv,message", BAD_COMMANDS,
                         ids=[" ".join(argv)[:40] for argv, _ in BAD_COMMANDS])
def test_a_mistake_prints_the_error_and_its_hint_and_exits_2(argv, message, capsys, tmp_path,
                                                             monkeypatch):
    from shapeflow import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err
    assert "\n  hint" in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written on the way


def test_every_subcommand_has_a_mistake_tested():
    from shapeflow.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) <= {argv[0] for argv, _ in BAD_COMMANDS}


def test_a_mistake_in_a_fresh_interpreter_has_no_traceback():
    done = _python_m("summary", "vit", "--input", "B,3,x-")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("ShapeError: cannot parse dim 'x-'") and "hint" in done.stderr
    done = _python_m("graph", "vit", "--input", "B,3,32,32", "--depth", "1")
    assert done.returncode == 0, done.stderr
    assert "digraph" in done.stdout and "blocks.11" in done.stdout


@pytest.mark.parametrize("spec,image", [("B,3,32,32", 32), ("B,1,64,64", 64)])
def test_summary_fits_the_reference_vit_to_the_input(spec, image, capsys):
    from shapeflow import cli

    assert cli.main(["summary", "vit", "--input", spec]) == 0
    lines = capsys.readouterr().out.splitlines()
    chain = dict(line.split(":", 1) for line in itertools.takewhile(
        lambda line: re.match(r"[\w.]+: ", line), lines))
    patches = (image // 16) ** 2
    assert chain["patchify"].strip().startswith(f"[B, {patches}, ")
    assert chain["blocks.0"].strip() == f"[B, {patches + 1}, 768]"
    assert chain["head"].strip() == "[B, 1000]"


# ---- training from the command line ---------------------------------------------------------
TINY_GPT = ["--steps", "3", "--batch-size", "4", "--block-size", "16", "--layers", "1",
            "--d-model", "32", "--heads", "2", "--sample-tokens", "5", "--val-batches", "2"]


def test_train_gpt_saves_a_checkpoint_and_reports_a_validation_loss(tmp_path, monkeypatch,
                                                                    capsys):
    import shapeflow as sf
    from shapeflow import cli
    from shapeflow.cli.train import DEFAULT_SAVE, load_gpt, validation_loss
    from shapeflow.data.datasets import CharDataset, text_corpus

    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "gpt", *TINY_GPT]) == 0
    out = capsys.readouterr().out
    assert list(p.name for p in tmp_path.iterdir()) == [DEFAULT_SAVE]  # no temporary left
    val = float(out.split("validation loss ")[1].split()[0])
    assert 2.0 < val < 5.0  # ln(76) = 4.33 untrained
    model, vocab = load_gpt(str(tmp_path / DEFAULT_SAVE))
    data = CharDataset(text_corpus(), 16)
    assert vocab == "".join(data.vocab)
    again = validation_loss(model, data.val_ids, 4, 16, 2)
    assert f"validation loss {again:.3f}" in out  # the saved weights are the ones reported
    assert sf.load(str(tmp_path / DEFAULT_SAVE))["steps"] == 3
    assert cli.main(["train", "gpt", *TINY_GPT, "--save", str(tmp_path / "my.safetensors")]) == 0
    assert (tmp_path / "my.safetensors").exists()


def test_the_first_progress_frame_shows_no_nan():
    import io

    from rich.console import Console

    from shapeflow.cli._progress import progress_bar

    buf = io.StringIO()
    console = Console(file=buf, width=80, force_terminal=True, color_system=None)
    with progress_bar(console, "step {task.completed:>5}") as progress:
        task = progress.add_task("train", total=10, loss=None)
        progress.refresh()  # the frame drawn before the first step
        first = buf.getvalue()
        progress.update(task, advance=1, loss=2.5)
        progress.refresh()
    assert "loss   ..." in first and "nan" not in first
    assert "loss 2.500" in buf.getvalue()
