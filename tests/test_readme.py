"""The README runs as written: every Python block, every command line, and every number it
states next to code (a comment after a print, an error it shows) is what the code prints."""

import ast
import contextlib
import io
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import tokenize
from pathlib import Path

import httpx
import pytest

import shapeflow as sf

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def _comments(block: str) -> list[tuple[int, str, bool]]:
    """(line number, text after `# `, whether the line holds only the comment)."""
    lines = block.splitlines()
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(block).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            own = not lines[row - 1][:col].strip()
            out.append((row, tok.string[1:].removeprefix(" "), own))
    return out


def _prints(block: str) -> list[tuple[int, int]]:
    """(first, last) line of each `print(...)` statement, one line or several."""
    return [(n.lineno, n.end_lineno) for n in ast.walk(ast.parse(block))
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
            and getattr(n.value.func, "id", None) == "print"]


def _expected_output(block: str) -> tuple[list[str], set[int]]:
    """What the block promises to print, in order: a comment on a line of a print statement,
    or comment lines right after one; and the line numbers of those comments."""
    comments = {row: (text, own) for row, text, own in _comments(block)}
    out, rows = [], set()
    for first, last in _prints(block):
        for row in range(first, last + 1):
            if row in comments and not comments[row][1]:
                out.append(comments[row][0].strip())
                rows.add(row)
        row = last + 1
        while row in comments and comments[row][1]:
            out.append(comments[row][0].strip())
            rows.add(row)
            row += 1
    return out, rows


def _error_lines(block: str) -> list[str]:
    """The error a block shows in its comments (`# ShapeError: ...` and the lines under it),
    one entry per line of str(error); a line the README wraps is joined again."""
    comments = [text for _, text, own in _comments(block) if own]
    start = next(i for i, c in enumerate(comments) if re.match(r"\w+Error: ", c))
    lines: list[str] = []
    for c in comments[start:]:
        if lines and re.match(r" {4,}\S", c):  # a wrapped line's rest, indented past the fields
            lines[-1] += " " + c.strip()
        else:
            lines.append(c)
    lines[0] = lines[0].split(": ", 1)[1]
    return lines


# Numbers in comments that are not output: each names a claim, checked here on what the
# block's code built (`ns`: the block's namespace).
def _gpt2_small(ns) -> None:
    c = ns["gpt"].config
    assert (c.n_layer, c.n_head, c.n_embd, c.block_size) == (12, 12, 768, 1024)  # GPT-2 small
    assert 124e6 < sum(p.numel() for p in ns["gpt"].parameters()) < 125e6


def _korthikanti_34sbh(ns) -> None:
    from shapeflow.ops import base

    s, b, h = 1024, 8, 768
    blocks = [r for r in ns["sel"].by_module if re.fullmatch(r"transformer\.h\.\d+", r.path)]
    assert len(blocks) == 12 and ns["gpt"].config.dropout == 0
    for r in blocks:  # 16-bit activations; LayerNorm's fp32 statistics on top
        assert r.activations - r.by_kind[base.NORM_STATS] == 32 * s * b * h
    # with dropout, its two masks (a byte an element) make Korthikanti et al.'s 34sbh
    gpt = sf.models.GPT(97, 64, 1, 4, 32, dropout=0.1, device="meta")
    idx = sf.empty(2, 64, dtype=sf.int64, device="meta")
    row = sf.memory.report(gpt, idx, idx, precision="bf16-true",
                           recompute="selective").row("transformer.h.0")
    assert row.activations - row.by_kind[base.NORM_STATS] == 34 * 64 * 2 * 32


CLAIMS = {"GPT-2 small": _gpt2_small, "34sbh per block": _korthikanti_34sbh}


def _numbers(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])\d+(?:[.,]\d+)*", text)


def test_readme_has_a_tour():
    assert len(_blocks()) >= 5


def test_the_comment_reader_sees_multi_line_prints():
    block = ('x = 1\nprint(x,\n      "a")   # first\n# second\n\n# not output\n'
             'print(2)  # third\n')
    assert _expected_output(block) == (["first", "second", "third"], {3, 4, 7})


def test_readme_tour_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the tour writes checkpoints and drawings
    namespace: dict = {}
    checked_claims = set()
    for block in _blocks():
        expected, output_rows = _expected_output(block)
        error = re.search(r"^# (\w+Error): ", block, re.M)
        if error:
            with pytest.raises(getattr(sf, error.group(1))) as info:
                exec(compile(block, "README.md", "exec"), namespace)
            got = str(info.value).splitlines()
            want = _error_lines(block)
            assert len(want) == len(got), (want, got)
            for w, g in zip(want, got):
                if w.endswith("..."):
                    assert g.startswith(w[:-3].rstrip()), (w, g)
                else:
                    assert g == w, (w, g)
        else:
            exec(compile(block, "README.md", "exec"), namespace)
        printed = capsys.readouterr().out
        position = 0
        for want in expected:
            found = printed.find(want, position)
            assert found >= 0, f"README promises {want!r}; the code printed:\n{printed}"
            position = found + len(want)
        # every other number in a comment: in its line's code (`# 256 != 128`), or a claim
        lines = block.splitlines()
        for row, text, own in _comments(block):
            if row in output_rows or error and own or not _numbers(text):
                continue
            claim = next((c for c in CLAIMS if c in text), None)
            if claim:
                CLAIMS[claim](namespace)
                checked_claims.add(claim)
                continue
            code = lines[row - 1].split("#", 1)[0]
            for n in _numbers(text):
                assert n in _numbers(code), f"README line {lines[row - 1]!r}: {n} is unchecked"
    assert checked_claims == set(CLAIMS)


def test_the_readme_states_what_the_training_snippet_reaches():
    text = README.read_text()
    # the exact figure moves with the BLAS's rounding; the claim the tour checks does not
    stated = re.search(r'above (\d+)%: \{acc > ([\d.]+)\}"\)\s+# above (\d+)%: True', text)
    assert stated and int(stated.group(1)) == int(stated.group(3)) == 90
    assert float(stated.group(2)) == 0.9


# ---- the command lines -----------------------------------------------------------------------
PLACEHOLDERS = {"N": "2", "T": "2", "PATH": "gpt.safetensors"}  # --steps N, --save PATH ...


def _command_lines() -> list[str]:
    """The `shapeflow ...` lines of the README's Command line section, continuations joined,
    comments dropped."""
    section = README.read_text().split("## Command line", 1)[1]
    block = re.search(r"```\n(.*?)```", section, re.S).group(1)
    joined = re.sub(r"\\\n\s*", "", block)
    return [re.split(r"\s{2,}#", line)[0].strip() for line in joined.splitlines()
            if line.startswith("shapeflow ")]


def _variants(line: str) -> list[list[str]]:
    """The line without its [optional] parts, then once with each optional part (of `a|b|c`,
    the last: `full`, ZeRO 3); placeholders get small values."""
    groups = re.findall(r"\[([^\]]*)\]", line)
    base = re.sub(r"\s*\[[^\]]*\]", "", line)
    runs = [base]
    for g in groups:
        runs.append(base + " " + re.sub(r"\S+\|(\S+)", lambda m: m.group(0).split("|")[-1], g))
    return [[PLACEHOLDERS.get(t, t) for t in shlex.split(r)[1:]] for r in runs]


def test_the_readme_lists_each_command():
    from shapeflow.cli import build_parser

    commands = {argv[0] for line in _command_lines() for argv in _variants(line)}
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) <= commands and "--version" in commands
    assert ["memory", "gpt", "--layers", "96", "--d-model", "12288", "--heads", "96", "--seq",
            "2048", "--batch", "1", "--vocab", "51200", "--dtype", "bf16", "--optimizer",
            "adamw", "--recompute", "full"] in _variants(
                next(line for line in _command_lines() if line.startswith("shapeflow memory")))


@pytest.mark.parametrize("argv", [a for line in _command_lines() for a in _variants(line)],
                         ids=lambda a: " ".join(a)[:60])
def test_each_readme_command_runs(argv, tmp_path, monkeypatch, capsys):
    from shapeflow import cli

    monkeypatch.chdir(tmp_path)
    if argv[0] == "demo":
        argv = [*argv, "--epochs", "1"]  # the full demo runs in tests/test_demo.py
    if argv[0] == "train":
        argv = [*argv, "--sample-tokens", "20"]
    if argv[0] == "run":  # the script it names: one that joins the ranks and says so
        (tmp_path / argv[3]).write_text("import shapeflow.distributed as dist\n"
                                        "dist.init_process_group()\n"
                                        "assert dist.get_world_size() == 2\n")
    if argv[0] == "--version":  # prints, then exits as argparse's --version does
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        assert done.value.code == 0
        return
    if argv[0] in ("serve", "bench"):  # they serve what `train gpt --save PATH` wrote
        _train_checkpoint(tmp_path / PLACEHOLDERS["PATH"])
    if argv[0] == "serve":  # a server runs until stopped: up, answering, then Ctrl-C
        with _served(tmp_path / PLACEHOLDERS["PATH"], *argv[2:]) as url:
            assert httpx.get(f"{url}/v1/models", timeout=5,
                             headers={"Authorization": "Bearer KEY"}).status_code == 200
        return
    assert cli.main(argv) == 0, capsys.readouterr().err
    if "-o" in argv:
        assert (tmp_path / argv[argv.index("-o") + 1]).stat().st_size > 1000


def _train_checkpoint(path: Path) -> None:
    from shapeflow import cli

    assert cli.main(["train", "gpt", "--steps", "2", "--save", str(path),
                     "--sample-tokens", "5"]) == 0


@contextlib.contextmanager
def _served(checkpoint: Path, *args: str):
    """`shapeflow serve CHECKPOINT ARGS` on a free loopback port; its URL until stopped."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "shapeflow", "serve", str(checkpoint),
                             "--port", str(port), "--log-level", "warning", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline, "shapeflow serve did not come up"
            time.sleep(0.1)
        yield url
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_the_readme_client_talks_to_a_served_checkpoint(tmp_path, capsys):
    """The README's `openai` snippet, as written but for the port, against `shapeflow serve`."""
    block = re.search(r"```python client\n(.*?)```", README.read_text(), re.S).group(1)
    _train_checkpoint(tmp_path / "gpt.ckpt")
    with _served(tmp_path / "gpt.ckpt") as url:
        assert "http://127.0.0.1:8000/v1" in block
        exec(compile(block.replace("http://127.0.0.1:8000", url), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    # the completion's text, then its token count: 32 characters of a character model
    assert re.search(r" 32\n", printed), printed


# ---- the pictures ----------------------------------------------------------------------------
def _dot_lines(dot: str) -> list[str]:
    return sorted(line.strip() for label in re.findall(r'label="((?:[^"\\]|\\.)*)"', dot)
                  for line in label.replace('\\"', '"').split("\\n") if line.strip())


def _svg_lines(svg: str) -> list[str]:
    import html

    return sorted(html.unescape(t).strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)
                  if t.strip())


def test_the_readme_pictures_show_what_its_code_draws():
    """Each image's labels (names, shapes, parameters, bytes) are those of the graph the
    README's snippet builds today."""
    from shapeflow.cli.graph import Figure2

    text = README.read_text()
    assert 'src="docs/images/figure2.svg"' in text and 'src="docs/images/vit_depth1.svg"' in text
    vit = sf.models.ViT(image_size=32, patch_size=4, in_channels=3, num_classes=10, dim=64,
                        depth=2, heads=4)
    assert "vit = sf.models.ViT(image_size=32, patch_size=4, in_channels=3, num_classes=10,\n" \
           "                    dim=64, depth=2, heads=4)" in text
    drawn = {"figure2.svg": sf.graph(Figure2(), sf.empty(784, "B", device="meta")),
             "vit_depth1.svg": sf.graph(vit, sf.empty("B", 3, 32, 32, device="meta"), depth=1)}
    for name, g in drawn.items():
        svg = (ROOT / "docs" / "images" / name).read_text()
        assert _svg_lines(svg) == _dot_lines(g.to_dot()), name
