"""The `shapeflow` command's own options."""

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
