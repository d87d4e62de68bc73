"""Complex tensors survive save and load in both formats, and cross to and from PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import shapeflow as sf


@pytest.mark.parametrize("dtype", [sf.complex64, sf.complex128])
@pytest.mark.parametrize("fmt", [None, "torch"])
def test_complex_round_trip(tmp_path, dtype, fmt):
    z = sf.tensor([1 + 2j, 3 - 4j, -0.5j], dtype=dtype)
    path = tmp_path / "c.pt"
    sf.save({"z": z, "w": sf.ones(2)}, path, **({"format": fmt} if fmt else {}))
    back = sf.load(path)
    assert back["z"].dtype is dtype
    np.testing.assert_array_equal(back["z"].numpy(), z.numpy())
    if fmt == "torch" or dtype is sf.complex128:  # (complex128: safetensors has none)
        theirs = torch.load(path, weights_only=True)["z"]
        np.testing.assert_array_equal(theirs.numpy(), z.numpy())


def test_safetensors_refuses_complex128_with_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="no complex128"):
        sf.save({"z": sf.zeros(2, dtype=sf.complex128)}, tmp_path / "c.st", format="safetensors")


def test_a_pytorch_complex_checkpoint_loads(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"z": torch.tensor([1 + 2j, 0.25j], dtype=torch.complex64)}, path)
    z = sf.load(path)["z"]
    assert z.dtype is sf.complex64 and z.tolist() == [1 + 2j, 0.25j]
