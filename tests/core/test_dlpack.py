"""Zero-copy interop: np.asarray, __dlpack__ / from_dlpack with NumPy and PyTorch, both ways:
each test writes through one side and reads the change through the other."""

import numpy as np
import pytest
import torch

import shapeflow as sf


def test_np_asarray_shares_memory():
    t = sf.zeros(2, 3)
    a = np.asarray(t)
    a[0, 1] = 5.0
    assert t[0, 1].item() == 5.0
    assert np.shares_memory(a, t.numpy())
    c = np.array(t, copy=True)
    c[0, 0] = 1.0
    assert t[0, 0].item() == 0.0


@pytest.mark.parametrize("dtype", [sf.float32, sf.float64, sf.int64, sf.int32, sf.uint8,
                                   sf.bool, sf.float16])
def test_torch_reads_and_writes_a_shapeflow_tensor(dtype):
    t = sf.zeros(4, dtype=dtype)
    pt = torch.from_dlpack(t)
    assert pt.dtype == {sf.float32: torch.float32, sf.float64: torch.float64,
                        sf.int64: torch.int64, sf.int32: torch.int32, sf.uint8: torch.uint8,
                        sf.bool: torch.bool, sf.float16: torch.float16}[dtype]
    pt[2] = 1
    assert t.numpy()[2] == 1  # the write through torch shows in shapeflow
    t.numpy()[3] = 1
    assert pt[3].item() == 1  # and the other way


def test_shapeflow_reads_and_writes_a_torch_tensor():
    pt = torch.arange(6.0).reshape(2, 3)
    t = sf.from_dlpack(pt)
    assert tuple(t.shape) == (2, 3) and t.dtype is sf.float32
    t.numpy()[1, 2] = -1.0
    assert pt[1, 2].item() == -1.0
    pt[0, 0] = 42.0
    assert t[0, 0].item() == 42.0
    view = sf.from_dlpack(pt.T)  # strided memory is shared too
    pt[0, 1] = 7.0
    assert view[1, 0].item() == 7.0


def test_numpy_both_ways():
    a = np.arange(4.0)
    t = sf.from_dlpack(a)
    t.numpy()[0] = 9.0
    assert a[0] == 9.0
    b = np.from_dlpack(t)
    b[1] = 8.0
    assert t[1].item() == 8.0
    assert t.__dlpack_device__() == (1, 0)


def test_export_errors():
    with pytest.raises(sf.GraphError, match="requires grad"):
        torch.from_dlpack(sf.zeros(2, requires_grad=True))
    with pytest.raises(sf.DeviceError, match="meta tensor"):
        sf.zeros(2, device="meta").__dlpack__()
    with pytest.raises(sf.DTypeError, match="__dlpack__"):
        sf.from_dlpack([1, 2])
    x = sf.ones(2)
    assert sf.from_dlpack(x) is x
