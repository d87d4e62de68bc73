"""How far a quantized tensor is from its float reference: SQNR, normalized L2, cosine.

The definitions of PyTorch's numeric suite (`torch.ao.ns.fx.utils.compute_sqnr`,
`compute_normalized_l2_error`, `compute_cosine_similarity`), computed in float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cosine_similarity", "normalized_l2", "sqnr"]


def _array(t) -> np.ndarray:
    """A float64 NumPy array of a Tensor, QuantizedTensor (dequantized), array or number."""
    if hasattr(t, "dequantize") and not isinstance(t, np.ndarray):
        t = t.dequantize()
    if hasattr(t, "detach") and not isinstance(t, np.ndarray):
        t = t.detach().numpy()
    return np.asarray(t, dtype=np.float64)


def _pair(ref, x, name: str) -> tuple[np.ndarray, np.ndarray]:
    from ..errors import ShapeError

    r, y = _array(ref), _array(x)
    if r.shape != y.shape:
        raise ShapeError(f"{name}: the reference has shape {list(r.shape)} but the compared "
                         f"tensor {list(y.shape)}", op=name,
                         hint="compare a float activation with its quantized twin")
    return r, y


def _norm(a: np.ndarray) -> float:
    # scaled so that squares of large activations do not overflow (np.linalg.norm does this)
    return float(np.linalg.norm(a.ravel()))


def sqnr(ref, x) -> float:
    """Signal-to-quantization-noise ratio in dB: 20 log10(||ref|| / ||ref - x||).

    inf when x equals ref; nan when both are zero (as PyTorch's `compute_sqnr`).
    """
    r, y = _pair(ref, x, "sqnr")
    signal, noise = _norm(r), _norm(r - y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(20 * np.log10(np.float64(signal) / np.float64(noise)))


def normalized_l2(ref, x) -> float:
    """||ref - x|| / ||ref||: the relative error (PyTorch's `compute_normalized_l2_error`)."""
    r, y = _pair(ref, x, "normalized_l2")
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(_norm(r - y)) / np.float64(_norm(r)))


def cosine_similarity(ref, x, eps: float = 1e-8) -> float:
    """Cosine of the angle between ref and x, both flattened; each norm clamped to eps."""
    r, y = _pair(ref, x, "cosine_similarity")
    r, y = r.ravel(), y.ravel()
    return float(np.dot(r / max(_norm(r), eps), y / max(_norm(y), eps)))
