"""The README's tour runs as written, and prints what its comments say it prints."""

import re
from pathlib import Path

import pytest

import shapeflow as sf

README = Path(__file__).resolve().parents[1] / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def _expected_output(block: str) -> list[str]:
    """Comments that show output: inline on a print line, or the lines right after one."""
    out, after_print = [], False
    for line in block.splitlines():
        stripped = line.strip()
        if stripped.startswith("print("):
            after_print = True
            if "  # " in line:
                out.append(line.split("  # ", 1)[1].strip())
        elif after_print and stripped.startswith("# "):
            out.append(stripped[2:])
        else:
            after_print = False
    return out


def test_readme_has_a_tour():
    assert len(_blocks()) >= 5


def test_readme_tour_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the tour writes checkpoints and drawings
    namespace: dict = {}
    for block in _blocks():
        error = re.search(r"^# (\w+Error): (.*)$", block, re.M)
        if error:
            with pytest.raises(getattr(sf, error.group(1))) as info:
                exec(compile(block, "README.md", "exec"), namespace)
            assert str(info.value).startswith(error.group(2).strip())
        else:
            exec(compile(block, "README.md", "exec"), namespace)
        printed = capsys.readouterr().out
        position = 0
        for want in _expected_output(block):
            found = printed.find(want, position)
            assert found >= 0, f"README promises {want!r}; the code printed:\n{printed}"
            position = found + len(want)
