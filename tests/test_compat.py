"""Torch tensors met by shapeflow (a clear error naming both types, or a copy by sf.tensor),
and shapeflow.compat.check_module, which lists the lines of a program still using torch."""

import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
import torch

import shapeflow as sf
from shapeflow.compat import check_module


def _mixing(fn):
    with pytest.raises(sf.DTypeError) as info:
        fn()
    text = str(info.value)
    assert "torch.Tensor" in text and "shapeflow.Tensor" in text, text
    return text


def test_a_torch_tensor_as_operand_of_a_shapeflow_op_names_both_types():
    a, t = sf.ones(2), torch.ones(2)
    for fn in (lambda: a + t, lambda: t + a, lambda: a - t, lambda: t - a, lambda: a * t,
               lambda: t * a, lambda: a / t, lambda: t / a):
        _mixing(fn)
    assert _mixing(lambda: a + t).startswith("add: got a torch.Tensor ([2] torch.float32)")
    _mixing(lambda: sf.matmul(sf.ones(2, 2), torch.ones(2, 2)))
    _mixing(lambda: sf.ones(2, 2) @ torch.ones(2, 2))
    _mixing(lambda: sf.where(a > 0, a, torch.zeros(2)))
    _mixing(lambda: sf.nn.Linear(2, 3)(torch.ones(4, 2)))


def test_a_shapeflow_tensor_given_to_torch_names_both_types():
    s = sf.ones(2)
    for fn in (lambda: torch.matmul(torch.ones(2), s), lambda: torch.nn.functional.relu(s),
               lambda: torch.nn.Linear(2, 2)(s), lambda: torch.cat([torch.ones(2), s])):
        text = _mixing(fn)
        assert "where a torch.Tensor is expected" in text


def test_sf_tensor_copies_a_torch_tensor_through_numpy():
    for dtype, want in [(torch.float32, sf.float32), (torch.float64, sf.float64),
                        (torch.int64, sf.int64), (torch.bool, sf.bool),
                        (torch.bfloat16, sf.bfloat16), (torch.uint8, sf.uint8)]:
        t = (torch.arange(6).reshape(2, 3) % 3).to(dtype)
        s = sf.tensor(t)
        assert s.dtype is want and s.shape == (2, 3)
        np.testing.assert_array_equal(s.numpy().astype(np.float64),
                                      t.to(torch.float64).numpy())
    w = torch.nn.Parameter(torch.ones(3))  # requires grad, a subclass: still copied
    s = sf.tensor(w, requires_grad=True)
    with torch.no_grad():
        w.mul_(5)
    assert s.requires_grad and s.detach().numpy().tolist() == [1.0, 1.0, 1.0]
    assert sf.as_tensor(torch.arange(3)).tolist() == [0, 1, 2]
    assert sf.tensor(torch.ones(2), dtype=sf.float16).dtype is sf.float16
    assert sf.tensor(torch.ones(1, dtype=torch.bfloat16)).numpy().dtype == ml_dtypes.bfloat16
    with pytest.raises(sf.DTypeError, match="got torch.Tensor") as info:
        sf.from_numpy(torch.ones(2))
    assert "sf.tensor(x)" in str(info.value)


def test_a_pytorch_state_dict_loads_into_a_shapeflow_model():
    ours = sf.nn.Sequential(sf.nn.Linear(3, 4), sf.nn.LayerNorm(4), sf.nn.Linear(4, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4),
                                 torch.nn.Linear(4, 2))
    assert not ours.load_state_dict(theirs.state_dict()).missing_keys
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(ours(sf.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        theirs[0].weight.zero_()  # the values were copied, not shared
    assert np.abs(ours[0].weight.detach().numpy()).sum() > 0


PROGRAM = textwrap.dedent("""\
    import os
    import shapeflow as sf
    import torch.nn as tnn
    from torch.nn.parallel import DistributedDataParallel
    from einops.layers.torch import Rearrange
    import torchvision

    # torch in a comment is not a use
    text = "import torch"


    def build():
        model = sf.nn.Linear(2, 2)
        return DistributedDataParallel(model)


    layer = tnn.Linear(2, 2)
    mod = __import__("torch")
    """)


def _lines(uses):
    return [u.line for u in uses]


def test_check_module_lists_lines_still_using_torch(tmp_path, capsys):
    path = tmp_path / "train.py"
    path.write_text(PROGRAM)
    uses = check_module(path)
    assert _lines(uses) == [3, 4, 5, 6, 14, 17, 18]
    assert uses[0].what == "imports torch.nn; use shapeflow.nn" and "tnn.Linear" in uses[5].text
    assert "shapeflow.nn.Rearrange" in uses[2].what
    assert "uses torch.nn.parallel.DistributedDataParallel" in uses[4].what
    printed = capsys.readouterr().out
    assert f"{path}:4: from torch.nn.parallel import DistributedDataParallel" in printed
    (tmp_path / "clean.py").write_text("import shapeflow as torch\nx = torch.ones(2)\n")
    assert check_module(tmp_path / "clean.py") == []
    assert "no PyTorch left" in capsys.readouterr().out
    assert len(check_module(tmp_path, verbose=False)) == 7  # a directory: every .py in it
    with pytest.raises(FileNotFoundError):
        check_module(tmp_path / "missing.py")


def test_check_module_takes_a_module(tmp_path, monkeypatch):
    (tmp_path / "ported_mod.py").write_text("import torch\n\nx = torch.ones(2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import ported_mod

    assert _lines(check_module(ported_mod, verbose=False)) == [1, 3]
    assert check_module(sf.data, verbose=False) == []  # a package: its files


def test_command_line(tmp_path):
    (tmp_path / "a.py").write_text("import torch\n")
    (tmp_path / "b.py").write_text("import numpy\n")
    run = [sys.executable, "-m", "shapeflow.compat"]
    out = subprocess.run(run + [str(tmp_path / "a.py")], capture_output=True, text=True)
    assert out.returncode == 1
    assert "a.py:1: import torch  (imports torch; use import shapeflow as torch)" in out.stdout
    assert out.stderr == ""  # (no runpy warning: shapeflow does not import compat itself)
    out = subprocess.run(run + [str(tmp_path / "b.py")], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == ""


PORTED = textwrap.dedent("""\
    import shapeflow as torch
    from torch.utils.data.dataloader import default_collate

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = torch.nn.Linear(2, 2).to(device)
    model = torch.compile(model)
    model.cuda()
    x = torch.ones(2, 2).cuda()
    batch = torch.utils.data.dataloader.default_collate([x])
    """)


def test_check_module_flags_the_lines_that_will_fail_on_shapeflow(tmp_path):
    import importlib
    import re

    path = tmp_path / "ported.py"
    path.write_text(PORTED)
    uses = {u.line: u.what for u in check_module(path, verbose=False)}
    try:  # torch's spelling of line 9 runs where shapeflow.utils.data has a dataloader module
        importlib.import_module("shapeflow.utils.data.dataloader")
        fails = [2, 7, 8]
    except ImportError:
        fails = [2, 7, 8, 9]
    assert sorted(uses) == fails  # lines 4, 5 and 6 (sf.compile) run as written
    for line in (7, 8):
        assert ".to(device)" in uses[line] and "torch.cuda.is_available()" in uses[line]
    for line in fails[:1] + fails[3:]:  # the spelling to use: one that has the name
        spelling = re.search(r"use (shapeflow[\w.]+)", uses[line]).group(1)
        assert spelling.endswith(".dataloader")
        assert callable(importlib.import_module(spelling).default_collate)
    with pytest.raises(sf.DeviceError):  # what line 8 does at run time
        sf.ones(2).cuda()
    assert isinstance(sf.compile(sf.nn.Linear(2, 2)), sf.nn.Module)  # line 6 runs
