"""Tensors: factories, dtypes, devices, the surface users touch first."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import shapeflow as sf


def test_factories_match_torch_shapes_and_dtypes():
    cases = [
        (sf.zeros(2, 3), torch.zeros(2, 3)), (sf.ones((2, 3)), torch.ones((2, 3))),
        (sf.full((2,), 7), torch.full((2,), 7)), (sf.full((2,), 7.0), torch.full((2,), 7.0)),
        (sf.arange(5), torch.arange(5)), (sf.arange(0, 1, 0.25), torch.arange(0, 1, 0.25)),
        (sf.linspace(0, 1, 5), torch.linspace(0, 1, 5)), (sf.eye(3), torch.eye(3)),
        (sf.eye(2, 3), torch.eye(2, 3)), (sf.tensor([1, 2]), torch.tensor([1, 2])),
        (sf.tensor([1.0, 2]), torch.tensor([1.0, 2])), (sf.tensor(True), torch.tensor(True)),
        (sf.zeros_like(sf.ones(2, dtype=sf.int32)),
         torch.zeros_like(torch.ones(2, dtype=torch.int32))),
    ]
    for s, t in cases:
        assert tuple(s.shape) == tuple(t.shape)
        assert str(s.dtype) == str(t.dtype).replace("torch.", "")
        np.testing.assert_allclose(s.numpy(), t.numpy())


def test_random_is_seeded():
    sf.manual_seed(1)
    a = sf.randn(3, 4)
    sf.manual_seed(1)
    b = sf.randn(3, 4)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    g = sf.Generator().manual_seed(5)
    c = sf.rand(2, generator=g)
    d = sf.rand(2, generator=sf.Generator().manual_seed(5))
    np.testing.assert_array_equal(c.numpy(), d.numpy())
    r = sf.randint(0, 10, (100,))
    assert r.dtype is sf.int64 and r.numpy().min() >= 0 and r.numpy().max() < 10
    assert sf.randn_like(a).shape == (3, 4) and sf.rand(3).dtype is sf.float32


def test_from_numpy_shares_memory():
    arr = np.zeros(3, dtype=np.float32)
    t = sf.from_numpy(arr)
    arr[0] = 5
    assert t.numpy()[0] == 5
    assert t.numpy() is arr


def test_tensor_surface():
    t = sf.tensor([[1.0, 2.0]], requires_grad=True)
    assert t.shape == (1, 2) and isinstance(t.shape, tuple) and t.shape.numel() == 2
    assert t.ndim == 2 and t.dim() == 2 and t.size() == (1, 2) and t.size(-1) == 2
    assert t.numel() == 2 and t.element_size() == 4 and t.nbytes == 8
    assert t.device == "cpu" and t.dtype is sf.float32 and t.is_leaf and t.grad_fn is None
    assert repr(t) == "tensor([[1., 2.]], shape=[1, 2], dtype=float32, requires_grad=True)"
    d = t.detach()
    assert not d.requires_grad and d.numpy() is t._data
    assert t.double().dtype is sf.float64 and t.half().dtype is sf.float16
    assert t.bfloat16().dtype is sf.bfloat16 and t.long().dtype is sf.int64
    assert t.bool().dtype is sf.bool and t.float().dtype is sf.float32
    assert t.to(sf.float64).dtype is sf.float64 and t.to("meta").device == "meta"
    c = t.clone()
    assert c.grad_fn is not None and c.detach().numpy() is not t._data
    assert np.asarray(t.detach()).shape == (1, 2)
    assert t.detach().tolist() == [[1.0, 2.0]] and sf.tensor(3).item() == 3
    assert sf.ones(2).requires_grad_(True).is_leaf


def test_requires_grad_only_for_floats():
    with pytest.raises(sf.DTypeError):
        sf.tensor([1, 2], requires_grad=True)


def test_numpy_of_tensor_requiring_grad_raises():
    with pytest.raises(sf.GraphError):
        sf.ones(2, requires_grad=True).numpy()


def test_meta_device_has_no_data():
    m = sf.ones(2, 3, device="meta")
    assert m.device == "meta" and m.shape == (2, 3) and m._data is None
    for f in (m.numpy, m.item, m.tolist):
        with pytest.raises(sf.DeviceError):
            f()
    out = (m @ sf.ones(3, 4, device="meta")).exp()
    assert out.shape == (2, 4) and out.device == "meta"
    with pytest.raises(sf.DeviceError):
        m.to("cpu")
    assert "device=meta" in repr(m)


def test_unknown_device_and_dtype():
    with pytest.raises(sf.DeviceError):
        sf.ones(2, device="cuda")
    with pytest.raises(sf.DTypeError):
        sf.ones(2, dtype="complex32")


def test_error_classes_subclass_builtins():
    assert issubclass(sf.ShapeError, ValueError) and issubclass(sf.DTypeError, TypeError)
    assert issubclass(sf.DeviceError, RuntimeError) and issubclass(sf.GraphError, RuntimeError)
    for cls in (sf.ShapeError, sf.DTypeError, sf.DeviceError, sf.GraphError):
        assert issubclass(cls, sf.ShapeflowError)


def test_import_is_fast(tmp_path):
    # Timed as users meet it, with bytecode cached: CI sets PYTHONDONTWRITEBYTECODE, and
    # compiling every module afresh would time the compiler, not shapeflow's import. NumPy's
    # own import is timed alongside and taken off: on a loaded machine both slow down alike.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    subprocess.check_call([sys.executable, "-c", "import shapeflow"], env=env)
    code = ("import time; t = time.perf_counter(); import numpy; n = time.perf_counter() - t; "
            "import shapeflow; print(n, time.perf_counter() - t - n)")
    runs = [subprocess.check_output([sys.executable, "-c", code], env=env).split()
            for _ in range(5)]
    numpy_s, own_s = (min(float(r[i]) for r in runs) for i in (0, 1))
    assert own_s < 0.15 and numpy_s + own_s < 0.6, runs


def test_torch_is_never_imported_by_shapeflow():
    code = ("import sys, shapeflow, shapeflow.nn, shapeflow.optim; "
            "print('torch' in sys.modules)")
    assert subprocess.check_output([sys.executable, "-c", code]).strip() == b"False"


def test_arange_with_a_symbolic_bound_runs_on_meta():
    L = sf.Dim("L")
    pos = sf.arange(0, L, device="meta")
    assert pos.shape == (L,) and pos.dtype == sf.int64
    assert sf.arange(2, L + 2, device="meta").shape[0].subs(L=7) == 7
    with pytest.raises(sf.ShapeError, match="concrete sizes"):
        sf.arange(L)  # on cpu a symbol has no value


def test_gpt_traces_with_symbolic_length():
    model = sf.models.GPT(vocab_size=32, block_size=16, n_layer=1, n_head=2, n_embd=8)
    logits, _ = model.to("meta")(sf.empty("B", "L", dtype=sf.int64, device="meta"))
    assert [str(s) for s in logits.shape] == ["B", "L", "32"]
