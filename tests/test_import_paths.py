"""PyTorch's module paths and keywords after `torch` -> `shapeflow`: `import shapeflow.onnx`,
`shapeflow.backends.cudnn`, `shapeflow.utils.data.<file>`, `shapeflow.nn.modules.<file>`,
Tensor's `is_*` flags and `to(...)` keywords, optimizers' implementation switches, and the
missing-name message under nn, nn.functional and nn.init."""

import importlib
import inspect
import pkgutil
import subprocess
import sys
import traceback

import numpy as np
import pytest

import shapeflow as sf

torch = pytest.importorskip("torch")


def _message(fn) -> str:
    try:
        fn()
    except AttributeError as e:
        return "".join(traceback.format_exception(e))
    raise AssertionError("no AttributeError")


# ---- module paths ------------------------------------------------------------------------

def test_import_shapeflow_onnx_is_sf_onnx():
    onnx = importlib.import_module("shapeflow.onnx")
    assert onnx is sf.onnx and onnx.export is sf.io.onnx.export
    from shapeflow.onnx import export

    assert export is sf.onnx.export


def test_backends_submodules_import_and_keep_their_flags():
    for name in ("cpu", "cuda", "cudnn", "mkl", "mps"):
        assert importlib.import_module(f"shapeflow.backends.{name}") is getattr(sf.backends,
                                                                               name)
    import shapeflow.backends.cudnn as cudnn

    before = cudnn.benchmark, cudnn.deterministic
    try:
        cudnn.benchmark, cudnn.deterministic = True, True
        assert sf.backends.cudnn.benchmark is True and sf.backends.cudnn.deterministic is True
    finally:
        cudnn.benchmark, cudnn.deterministic = before
    assert cudnn.is_available() is False and sf.backends.mps.is_available() is False
    assert isinstance(sf.backends.cuda.matmul.allow_tf32, bool)  # (other tests set it)


@pytest.mark.parametrize("file", ["dataloader", "dataset", "sampler", "distributed"])
def test_utils_data_files_have_torchs_names(file):
    ours = importlib.import_module(f"shapeflow.utils.data.{file}")
    theirs = importlib.import_module(f"torch.utils.data.{file}")
    have = [n for n in theirs.__all__ if hasattr(sf.data, n)]
    assert have and {n: getattr(ours, n) for n in have} == {n: getattr(sf.data, n)
                                                            for n in have}
    assert set(ours.__all__) == set(have)
    for name in sorted(set(theirs.__all__) - set(have)):
        assert (f"not implemented in shapeflow: torch.utils.data.{file}.{name}"
                in _message(lambda name=name: getattr(ours, name)))


def test_utils_data_collate_path():
    from shapeflow.utils.data._utils.collate import default_collate
    from shapeflow.utils.data.dataloader import DataLoader

    assert default_collate is sf.data.default_collate and DataLoader is sf.data.DataLoader
    batch = [(np.float32(1.5), 2), (np.float32(3.0), 4)]
    ours = default_collate(batch)
    theirs = torch.utils.data.default_collate(batch)
    assert [t.tolist() for t in ours] == [t.tolist() for t in theirs]


def _torch_module_files() -> dict:
    files = {}
    for m in pkgutil.iter_modules(torch.nn.modules.__path__):
        mod = importlib.import_module(f"torch.nn.modules.{m.name}")
        if m.name[0] != "_" and getattr(mod, "__all__", None):
            files[m.name] = mod
    return files


@pytest.mark.parametrize("file", sorted(_torch_module_files()))
def test_nn_modules_file_paths(file):
    theirs = _torch_module_files()[file]
    ours = importlib.import_module(f"shapeflow.nn.modules.{file}")
    assert getattr(sf.nn.modules, file) is ours
    have = [n for n in theirs.__all__ if hasattr(sf.nn, n)]
    for name in have:
        assert getattr(ours, name) is getattr(sf.nn, name), name
    assert set(ours.__all__) == set(have) and set(have) <= set(dir(ours))
    for name in sorted(set(theirs.__all__) - set(have)):
        text = _message(lambda name=name: getattr(ours, name))
        assert f"not implemented in shapeflow: torch.nn.modules.{file}.{name}" in text
        assert "Did you mean" not in text
    assert "has no attribute 'Frobnicate'" in _message(lambda: ours.Frobnicate)


def test_nn_modules_private_bases_and_helpers():
    from shapeflow.nn.modules.batchnorm import _BatchNorm
    from shapeflow.nn.modules.conv import _ConvNd
    from shapeflow.nn.modules.instancenorm import _InstanceNorm
    from shapeflow.nn.modules.loss import _Loss
    from shapeflow.nn.modules.utils import _ntuple, _pair, _single, _triple

    assert isinstance(sf.nn.BatchNorm2d(3), _BatchNorm)
    assert isinstance(sf.nn.InstanceNorm2d(3), _InstanceNorm)
    assert isinstance(sf.nn.Conv2d(1, 1, 3), _ConvNd)
    assert isinstance(sf.nn.MSELoss(), _Loss)
    from torch.nn.modules import utils as tu

    for x in (3, (1, 2), [4, 5, 6]):
        assert (_single(x), _pair(x), _triple(x), _ntuple(4)(x)) == (
            tu._single(x), tu._pair(x), tu._triple(x), tu._ntuple(4)(x))
    assert sf.nn.modules.Linear is sf.nn.Linear  # torch.nn.modules re-exports its classes


# ---- missing names under nn, nn.functional, nn.init ---------------------------------------

@pytest.mark.parametrize("ours,theirs", [("nn", "nn"), ("nn.functional", "nn.functional"),
                                         ("nn.init", "nn.init")])
def test_missing_nn_names_say_pytorch_has_them(ours, theirs, monkeypatch):
    from shapeflow import _torch_names

    space = importlib.import_module(f"shapeflow.{ours}")
    stored = {"nn": _torch_names.NN, "nn.functional": _torch_names.NN_FUNCTIONAL,
              "nn.init": _torch_names.NN_INIT}[theirs]
    torch_space = importlib.import_module(f"torch.{theirs}")
    lacking = sorted(n for n in stored if hasattr(torch_space, n) and not hasattr(space, n))
    if not lacking:  # shapeflow has them all: take one away for the test
        lacking = sorted(n for n in stored if n in vars(space) and callable(vars(space)[n]))[:1]
        monkeypatch.delattr(space, lacking[0])
    for name in lacking[:5]:
        text = _message(lambda name=name: getattr(space, name))
        assert f"module 'shapeflow.{ours}' has no attribute {name!r}" in text
        assert (f"not implemented in shapeflow: torch.{theirs}.{name}" in text
                or f"shapeflow has no torch.{theirs}.{name};" in text)
        assert "Did you mean" not in text
    plain = _message(lambda: space.frobnicate_xyz)
    assert "has no attribute 'frobnicate_xyz'" in plain and "shapeflow" in plain
    assert "not implemented" not in plain


# ---- Tensor: is_* flags and to() keywords ---------------------------------------------------

def _flag(t, name, *args):
    value = getattr(t, name)
    return value(*args) if callable(value) else value


def test_is_flags_match_pytorch():
    names = [n for n in dir(torch.Tensor) if n.startswith("is_")
             and n not in ("is_coalesced",)]  # dense tensors: torch raises, shapeflow too
    for dtype in ("float32", "int64", "uint8", "bool"):
        data = np.array([[1, 0], [2, 3]]).astype(dtype)
        ours, theirs = sf.tensor(data), torch.tensor(data)
        for name in names:
            args = (ours,) if name in ("is_same_size", "is_set_to") else ()
            targs = (theirs,) if args else ()
            if name == "is_nonzero":
                ours_1, theirs_1 = sf.tensor(data[:1, :1]), torch.tensor(data[:1, :1])
                assert _flag(ours_1, name) == _flag(theirs_1, name)
                continue
            assert _flag(ours, name, *args) == _flag(theirs, name, *targs), (dtype, name)
    t = sf.ones(2, 3)
    assert t.T.is_set_to(t) is torch.ones(2, 3).T.is_set_to(torch.ones(2, 3)) is False
    assert sf.empty(2, device="meta").is_cpu is False
    with pytest.raises(RuntimeError, match="more than one value"):
        sf.ones(2).is_nonzero()


def test_to_accepts_non_blocking_copy_and_memory_format():
    data = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    ours, theirs = sf.tensor(data), torch.tensor(data)
    assert ours.to("cpu", non_blocking=True) is ours
    copied = ours.to(copy=True)
    assert copied is not ours and theirs.to(copy=True).data_ptr() != theirs.data_ptr()
    copied.fill_(0.0)
    assert ours.numpy()[0, 1, 2, 3] == 23  # a copy, not the same array
    assert ours.to(sf.float64, False, True).dtype is sf.float64  # positional non_blocking, copy
    for fmt in ("preserve_format", "contiguous_format", "channels_last"):
        out = ours.to(memory_format=getattr(sf, fmt))
        ref = theirs.to(memory_format=getattr(torch, fmt))
        np.testing.assert_array_equal(out.numpy(), ref.numpy())
    # contiguous_format shapes the copy to() makes (PyTorch's), not a tensor it returns as is
    wide, twide = sf.tensor(data[0, 0]).T, torch.tensor(data[0, 0]).T
    for kw in ({}, {"dtype": "float64"}, {"copy": True}):
        tkw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
        out = wide.to(memory_format=sf.contiguous_format, **kw)
        ref = twide.to(memory_format=torch.contiguous_format, **tkw)
        assert (out is wide, out.is_contiguous()) == (ref is twide, ref.is_contiguous()), kw
    with pytest.raises(RuntimeError, match="rank 4"):
        torch.ones(2).to(memory_format=torch.channels_last)
    with pytest.raises(sf.ShapeflowError, match="rank 4"):
        sf.ones(2).to(memory_format=sf.channels_last)
    with pytest.raises(TypeError, match="memory_format"):
        sf.ones(2).to(memory_format="channels_last")


# ---- optimizers: fused, foreach, capturable, differentiable -------------------------------

OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
              "RAdam"]
FLAGS = ("fused", "foreach", "capturable", "differentiable")


def _step(name: str, **flags) -> np.ndarray:
    p = sf.nn.Parameter(sf.tensor(np.linspace(-1, 1, 6, dtype=np.float32)))
    opt = getattr(sf.optim, name)([p], lr=0.1, **flags)
    p.grad = sf.tensor(np.linspace(0.5, -0.5, 6, dtype=np.float32))
    opt.step()
    return p.detach().numpy()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_optimizer_implementation_flags(name):
    accepted = [f for f in FLAGS if f in inspect.signature(getattr(torch.optim, name)).parameters]
    plain = _step(name)
    for flag in accepted:
        for value in (None, False) if flag in ("fused", "foreach") else (False,):
            np.testing.assert_array_equal(_step(name, **{flag: value}), plain)
    for flag in set(accepted) & {"fused", "foreach"}:  # one implementation: the same update
        np.testing.assert_array_equal(_step(name, **{flag: True}), plain)
    why = {"capturable": "no cuda device", "differentiable": "outside the graph"}
    for flag in set(accepted) & set(why):  # the error says what shapeflow does not do
        with pytest.raises(sf.ShapeflowError, match=f"{flag}=True .*not implemented.*"
                                                    f"{why[flag]}"):
            _step(name, **{flag: True})


def test_nn_modules_as_an_attribute_before_any_import_of_it():
    """`sf.nn.modules.conv.Conv2d` with nothing imported before: the package's __getattr__
    once asked itself for `modules` again without end (a RecursionError)."""
    code = ("import shapeflow as sf\n"
            "assert sf.nn.modules.conv.Conv2d is sf.nn.Conv2d\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
