"""Torch tensors where shapeflow tensors belong: recognising one without importing torch,
the error that names both types, and a torch tensor's values as NumPy (for sf.tensor)."""

from __future__ import annotations

import sys

from .errors import DTypeError


def is_torch_tensor(x) -> bool:
    """Whether x is a PyTorch tensor (without importing torch: only if it is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, getattr(torch, "Tensor", ()))


def mixing_error(x, op: str | None = None) -> DTypeError:
    """The error for a torch tensor given to shapeflow: both types named, and the way out."""
    shape = "[" + ", ".join(str(s) for s in tuple(x.shape)) + "]"
    where = f"{op}: " if op else ""
    return DTypeError(
        f"{where}got a torch.Tensor ({shape} {x.dtype}) where a shapeflow.Tensor is expected: "
        "PyTorch's and shapeflow's tensors do not mix",
        op=op,
        hint="convert with sf.tensor(x) (a copy, through NumPy), or port the code that made "
        "it; shapeflow.compat.check_module(...) lists the lines still using torch",
    )


def torch_values(x):
    """A torch tensor's values as a NumPy array (a copy; bfloat16 through ml_dtypes); any
    other object (a torch.Size...) as it is."""
    if not is_torch_tensor(x):
        return x
    x = x.detach().cpu()
    if str(x.dtype) == "torch.bfloat16":
        import ml_dtypes

        return x.float().numpy().astype(ml_dtypes.bfloat16)
    return x.numpy().copy()


def torch_function(cls, func, types, args=(), kwargs=None):
    """Tensor.__torch_function__: a torch function given a shapeflow tensor raises, clearly.

    (For `torch_tensor + sf_tensor` PyTorch turns this error into NotImplemented and Python
    asks shapeflow's `__radd__`, which raises the same error from its side.)
    """
    name = getattr(func, "__name__", repr(func))
    found = next((a for a in _flatten(args, kwargs) if isinstance(a, cls)), None)
    what = (f"[{', '.join(str(s) for s in found.shape)}] {found.dtype}" if found is not None
            else "a tensor")
    raise DTypeError(
        f"torch.{name}: got a shapeflow.Tensor ({what}) where a torch.Tensor is expected: "
        "PyTorch's and shapeflow's tensors do not mix",
        op=f"torch.{name}",
        hint="call shapeflow's op (sf.<name> or the tensor's method), or convert with "
        "torch.from_numpy(t.numpy()); shapeflow.compat.check_module(...) lists the lines "
        "still using torch",
    )


def _flatten(args, kwargs):
    for a in (*args, *(kwargs or {}).values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a
