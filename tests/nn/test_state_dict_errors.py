"""load_state_dict's errors are RuntimeErrors, as PyTorch's are, so ported `except
RuntimeError` clauses catch them; the message starts as PyTorch's does."""

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn

torch = pytest.importorskip("torch")


def _pair():
    sf.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)), \
        torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def _bad(kind):
    """A state dict with one size mismatch, a missing key or an unexpected key."""
    sd = {k: np.zeros(v.shape, np.float32) for k, v in _pair()[0].state_dict().items()}
    if kind == "size":
        sd["1.bias"] = np.zeros(9, np.float32)
    elif kind == "missing":
        del sd["0.bias"]
    else:
        sd["head.weight"] = np.zeros(1, np.float32)
    return sd


@pytest.mark.parametrize("kind", ["size", "missing", "unexpected"])
def test_the_same_builtin_as_pytorch(kind):
    model, tmodel = _pair()
    with pytest.raises(RuntimeError) as want:
        tmodel.load_state_dict({k: torch.from_numpy(v) for k, v in _bad(kind).items()})
    with pytest.raises(RuntimeError) as got:
        model.load_state_dict(_bad(kind))
    assert isinstance(got.value, sf.ShapeflowError)
    head = "Error(s) in loading state_dict for Sequential:"
    assert str(want.value).startswith(head) and str(got.value).startswith(head)
    assert ("1.bias" if kind == "size" else "0.bias" if kind == "missing"
            else "head.weight") in str(got.value)


def test_a_size_mismatch_is_still_a_shape_error_and_names_both_shapes():
    model, _ = _pair()
    with pytest.raises(sf.ShapeError) as e:
        model.load_state_dict(_bad("size"), strict=False)
    assert isinstance(e.value, RuntimeError)
    assert "[9]" in str(e.value) and "[2]" in str(e.value) and "size mismatch" in str(e.value)


def test_a_dtype_that_cannot_be_cast_is_a_runtime_error():
    model = nn.Linear(2, 2)
    model.register_buffer("count", sf.tensor([0, 0]))
    sd = {k: v.clone() for k, v in model.state_dict().items()}
    sd["count"] = sf.tensor([0.5, 1.5])  # shapeflow refuses float into an int buffer
    with pytest.raises(RuntimeError) as e:
        model.load_state_dict(sd)
    assert isinstance(e.value, sf.DTypeError) and "count" in str(e.value)
