"""examples/: each script runs top to bottom in a fresh interpreter, prints what its comments
say, and leaves nothing behind."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_readme import _expected_output

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_the_examples_are_there():
    assert {"tensor_basics.py", "shape_chain.py", "memory_plan.py", "training.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_example_runs_and_prints_what_it_says(name, tmp_path):
    source = (EXAMPLES / name).read_text()
    assert source.startswith('"""') and f"python examples/{name}" in source  # says how to run
    done = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=tmp_path, text=True,
                          capture_output=True, timeout=600, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    position = 0
    for want in _expected_output(source)[0]:
        found = done.stdout.find(want, position)
        assert found >= 0, f"{name} promises {want!r}; it printed:\n{done.stdout}"
        position = found + len(want)
    assert list(tmp_path.iterdir()) == []
    if name == "training.py":
        accuracies = [float(a) for a in re.findall(r"test accuracy ([\d.]+)%", done.stdout)]
        assert accuracies[-2] >= 90 and accuracies[-1] == accuracies[-2]  # reloaded: the same
    if name == "memory_plan.py":  # the README's figures, from the same models
        assert "158.6 MiB to train, 48.1 MiB to infer" in done.stdout
        assert "activations    3.0 GiB" in done.stdout and "954.2 MiB" in done.stdout
