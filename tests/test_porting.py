"""Porting a PyTorch program by its imports: sf.cuda / sf.backends / sf.accelerator answer as
PyTorch does without a GPU, and a missing name says what PyTorch has and what to use."""

import contextlib
import subprocess
import sys
import traceback

import pytest
import torch

import shapeflow as sf
from shapeflow import _porting, _torch_names, compat


def test_device_selection_boilerplate_runs_unchanged_and_picks_cpu():
    torch_ = sf  # the program's `import torch` became `import shapeflow as torch`
    device = "cuda" if torch_.cuda.is_available() else (
        "mps" if torch_.backends.mps.is_available() else "cpu")
    torch_.manual_seed(0)
    torch_.cuda.manual_seed(0)
    torch_.cuda.manual_seed_all(0)
    torch_.backends.cuda.matmul.allow_tf32 = True
    torch_.backends.cudnn.allow_tf32 = True
    torch_.backends.cudnn.benchmark = True
    torch_.backends.cudnn.deterministic = True
    torch_.set_float32_matmul_precision("high")
    if torch_.accelerator.is_available():
        device = torch_.accelerator.current_accelerator().type
    x = torch_.ones(2, device=device)
    torch_.cuda.synchronize()
    torch_.cuda.empty_cache()
    assert device == "cpu" and x.device == "cpu"
    assert sf.backends.cudnn.benchmark is True and sf.backends.cuda.matmul.allow_tf32 is True
    assert sf.get_float32_matmul_precision() == "high"
    sf.set_float32_matmul_precision("highest")
    with pytest.raises(ValueError):
        sf.set_float32_matmul_precision("fast")


def test_answers_are_those_of_pytorch_on_a_machine_without_a_gpu():
    assert sf.cuda.is_available() is torch.cuda.is_available() is False
    assert sf.cuda.device_count() == torch.cuda.device_count() == 0
    assert sf.cuda.is_initialized() is False and sf.cuda.is_bf16_supported() is False
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved"):
        assert getattr(sf.cuda, name)() == getattr(torch.cuda, name)() == 0
    assert sf.accelerator.is_available() is torch.accelerator.is_available() is False
    assert sf.accelerator.current_accelerator() is None
    assert torch.accelerator.current_accelerator() is None
    assert sf.accelerator.device_count() == 0
    assert sf.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert sf.backends.cudnn.is_available() is False and sf.backends.cuda.is_built() is False
    # mkl: whether shapeflow's own float products go to MKL (backend/cpu/gemm.py)
    from shapeflow.backend.cpu import gemm

    assert sf.backends.mkl.is_available() is (gemm.backend() == "mkl")
    # seeding the (absent) cuda devices leaves the cpu generator alone
    sf.manual_seed(3)
    a = sf.randn(4)
    sf.manual_seed(3)
    sf.cuda.manual_seed_all(99)
    assert (a.numpy() == sf.randn(4).numpy()).all()


def test_questions_about_a_cuda_device_raise_device_errors():
    for fn in (sf.cuda.current_device, sf.cuda.get_device_name, sf.cuda.initial_seed):
        with pytest.raises(sf.DeviceError, match="no cuda device"):
            fn()
    with pytest.raises(sf.DeviceError):
        sf.ones(2).cuda()
    assert sf.ones(2).is_cuda is False


def test_cuda_amp_is_shapeflows_amp():
    # torch.cuda.amp's names port unchanged: shapeflow's autocast and GradScaler (cpu)
    assert sf.cuda.amp is sf.amp and sf.cuda.amp.GradScaler is sf.amp.GradScaler


def _printed(fn) -> str:
    """The error as the traceback module prints it."""
    try:
        fn()
    except AttributeError as e:
        return "".join(traceback.format_exception(e))
    raise AssertionError("no AttributeError")


def test_missing_pytorch_names_on_the_module_say_so_without_a_wrong_suggestion():
    text = _printed(lambda: sf.jit)
    assert "shapeflow has no torch.jit;" in text and "Did you mean" not in text
    assert "sf.tensor(data, dtype=sf.int64)" in _printed(lambda: sf.LongTensor)
    # a name PyTorch has with nothing to suggest
    lacking = sorted(n for n in _torch_names.TORCH if not hasattr(sf, n)
                     and _porting._advice(f"torch.{n}", n) is None)
    assert lacking
    text = _printed(lambda: getattr(sf, lacking[0]))
    assert f"not implemented in shapeflow: torch.{lacking[0]}" in text
    # a torch function shapeflow has as a tensor method
    methods = sorted(n for n in _torch_names.TORCH if not hasattr(sf, n)
                     and _porting._is_tensor_attribute(n))
    if methods:
        assert f"use the tensor method t.{methods[0]}(...)" in _printed(
            lambda: getattr(sf, methods[0]))


def test_missing_pytorch_names_on_tensors_say_so():
    t = sf.ones(2)
    text = _printed(lambda: t.storage)
    assert "'Tensor' object has no attribute 'storage': shapeflow has no torch.Tensor.storage" \
        in text and "Did you mean" not in text
    # an in-place variant whose out-of-place op exists
    inplace = sorted(n for n in _torch_names.TENSOR if n.endswith("_")
                     and not hasattr(t, n) and hasattr(t, n[:-1]))
    assert inplace
    assert f"use the out-of-place t.{inplace[0][:-1]}(...)" in _printed(
        lambda: getattr(t, inplace[0]))
    assert not hasattr(t, "storage") and not hasattr(sf.Tensor, "storage")
    assert "storage" not in dir(t) and {"type", "view_as", "numel"} <= set(dir(t))


def test_stand_ins_never_hide_what_exists():
    class Probe:
        def numel(self):
            return 7

    _porting.install_tensor_names(Probe)
    assert Probe().numel() == 7
    with pytest.raises(AttributeError, match="torch.Tensor.storage"):
        Probe().storage
    t = sf.ones(2, 2)
    for name in dir(t):  # every attribute dir(t) shows is there (.imag of a real tensor
        with contextlib.suppress(sf.ShapeflowError):  # raises as PyTorch's: there, but not
            getattr(t, name)  # for this dtype)


def test_the_interpreter_suggests_for_typos_only():
    # Python 3.11 makes its "Did you mean" when it prints the error (not in traceback.py)
    code = ("import sys, shapeflow as sf\n"
            "for f in (lambda: sf.zeross, lambda: sf.ones(1).numell, lambda: sf.sparse,\n"
            "          lambda: sf.ones(1).storage):\n"
            "    try:\n        f()\n"
            "    except AttributeError:\n        sys.excepthook(*sys.exc_info())\n"
            "    print('---', file=sys.stderr)\n")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr
    typo, typo_tensor, sparse, storage = err.split("---")[:4]
    assert "Did you mean: 'zeros'" in typo and "Did you mean: 'numel'" in typo_tensor
    assert "not implemented in shapeflow: torch.sparse" in sparse and "Did you mean" not in sparse
    assert "shapeflow has no torch.Tensor.storage" in storage and "Did you mean" not in storage


def test_backends_no_longer_points_at_backend():
    assert sf.backends.__name__ == "shapeflow.backends"
    with pytest.raises(AttributeError, match="module 'shapeflow.backends' has no attribute"):
        sf.backends.frobnicate


@pytest.mark.skipif(torch.__version__.split("+")[0] != _torch_names.TORCH_VERSION,
                    reason="the stored names are those of another torch version")
def test_stored_torch_names_are_the_installed_torchs():
    from pathlib import Path

    stored = Path(_torch_names.__file__).read_text()
    assert stored == compat.torch_names_source(), (
        "regenerate: python -m shapeflow.compat --torch-names > src/shapeflow/_torch_names.py")


def _porting_program() -> str:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Porting from PyTorch", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _run_program(source: str, capsys) -> list[str]:
    exec(compile(source, "README.md", "exec"), {})
    return capsys.readouterr().out.splitlines()


def test_readme_porting_program_is_a_pytorch_program_ported_by_its_imports(capsys):
    """The README's program runs on shapeflow, and with its `# was:` imports on PyTorch."""
    ported = _porting_program()
    original = "\n".join(line.split("# was: ")[1] if "# was: " in line else line
                         for line in ported.splitlines())
    assert "import shapeflow" in ported and "shapeflow" not in original
    for source in (ported, original):
        lines = _run_program(source, capsys)
        assert lines[-1] == "cpu torch.FloatTensor"
        losses = [float(line.rsplit(" ", 1)[1]) for line in lines[:-1]]
        assert len(losses) == 5 and losses[-1] < losses[0], lines


@pytest.mark.parametrize("call", [
    lambda t: sf.exp(t), lambda t: sf.relu(t), lambda t: sf.sum(t), lambda t: sf.reshape(t, (6,)),
    lambda t: sf.nn.functional.gelu(t), lambda t: sf.cat([sf.ones(2, 3), t]),
    lambda t: sf.where(sf.ones(2, 3) > 0, sf.ones(2, 3), t),
])
def test_a_torch_tensor_into_any_op_names_both_frameworks(call):
    """One-input ops too: a torch tensor has .data, .device and .shape, and used to pass."""
    with pytest.raises(sf.DTypeError, match="torch.Tensor .* shapeflow.Tensor"):
        call(torch.ones(2, 3))
