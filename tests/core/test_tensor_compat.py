"""PyTorch idioms on Tensor that are not ops: format specs, type strings, view_as."""

import numpy as np
import pytest
import torch

import shapeflow as sf

DTYPES = [("float32", sf.float32, torch.float32), ("float64", sf.float64, torch.float64),
          ("float16", sf.float16, torch.float16), ("bfloat16", sf.bfloat16, torch.bfloat16),
          ("int64", sf.int64, torch.int64), ("int32", sf.int32, torch.int32),
          ("int16", sf.int16, torch.int16), ("int8", sf.int8, torch.int8),
          ("uint8", sf.uint8, torch.uint8), ("bool", sf.bool, torch.bool)]


def _outcome(fn):
    try:
        return fn()
    except (TypeError, ValueError) as e:
        return type(e), str(e)


@pytest.mark.parametrize("value,dtypes", [
    (1.2345678, ("float32", "float64", "float16", "bfloat16")),
    (-3, ("int64", "int32", "int8")),
    (True, ("bool",)),
])
@pytest.mark.parametrize("spec", ["", ".4f", ">12.3e", "+.2%", "g", "d", "08.2f", "x"])
def test_format_as_pytorch(value, dtypes, spec):
    for name, sdt, tdt in DTYPES:
        if name not in dtypes:
            continue
        s, t = sf.tensor(value, dtype=sdt), torch.tensor(value, dtype=tdt)
        want = _outcome(lambda t=t: format(t, spec))
        got = _outcome(lambda s=s: format(s, spec))
        assert got == want, (name, spec)


def test_format_of_a_loss_that_requires_grad():
    w = sf.tensor([0.5, 2.0], requires_grad=True)
    loss = (w * w).sum()
    assert f"{loss:.4f}" == "4.2500" and f"step {1}: {loss:.2e}" == "step 1: 4.25e+00"
    assert f"{sf.tensor(3.14159):6.2f}" == "  3.14"


def test_format_of_tensors_that_are_not_numbers_is_pytorchs():
    for s, t in [(sf.ones(2), torch.ones(2)), (sf.ones(1), torch.ones(1))]:
        with pytest.raises(TypeError, match="unsupported format string passed to "
                                            "Tensor.__format__"):
            format(s, ".2f")
        with pytest.raises(TypeError):
            format(t, ".2f")
        assert format(s, "") == str(s)
    m = sf.empty((), device="meta")  # no value to format: as PyTorch's meta tensors
    assert format(m, "") == str(m)
    with pytest.raises(TypeError):
        format(m, ".3f")
    with pytest.raises(TypeError):
        format(torch.empty((), device="meta"), ".3f")


def test_type_strings_are_pytorchs():
    for _, sdt, tdt in DTYPES:
        assert sf.zeros(2, dtype=sdt).type() == torch.zeros(2, dtype=tdt).type()
    assert sf.zeros(2, device="meta").type() == torch.zeros(2, device="meta").type()
    assert sf.ones(2).type() == "torch.FloatTensor"


def test_type_converts():
    x = sf.tensor([1.5, -2.5])
    assert x.type(sf.float32) is x and x.type("torch.FloatTensor") is x
    for target in (sf.float64, "torch.DoubleTensor", "DoubleTensor"):
        y = x.type(target)
        assert y.dtype is sf.float64 and y.tolist() == [1.5, -2.5]
    assert x.type("torch.LongTensor").tolist() == torch.tensor([1.5, -2.5]).type(
        "torch.LongTensor").tolist()
    with pytest.raises(sf.DTypeError, match="invalid type"):
        x.type("float64")
    with pytest.raises(sf.DeviceError):
        x.type("torch.cuda.FloatTensor")
    w = sf.tensor([1.0, 2.0], requires_grad=True)
    w.type(sf.float64).sum().backward()  # a cast in the graph
    assert w.grad.tolist() == [1.0, 1.0]


def test_view_as_matches_torch_with_gradients():
    a = np.arange(12, dtype=np.float32)
    s, t = sf.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    other_s, other_t = sf.zeros(3, 4), torch.zeros(3, 4)
    vs, vt = s.view_as(other_s), t.view_as(other_t)
    assert vs.shape == tuple(vt.shape)
    np.testing.assert_array_equal(vs.detach().numpy(), vt.detach().numpy())
    (vs * sf.tensor(a.reshape(3, 4))).sum().backward()
    (vt * torch.tensor(a.reshape(3, 4))).sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), t.grad.numpy())
    with pytest.raises(sf.ShapeError):
        s.view_as(sf.zeros(5))
    m = sf.empty(sf.Dim("B"), 4, device="meta")
    assert sf.empty(m.shape[0] * 4, device="meta").view_as(m).shape == m.shape
