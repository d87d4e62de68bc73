"""hash_tensor: the xor of every element's 64-bit pattern over dims (floats as float64 bits,
integers and bools as int64), a uint64 fingerprint as PyTorch's mode 0."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import ArgumentError, ShapeIndexError, ShapeRuntimeError
from ...shape import normalize_dims
from ...tensor import Tensor, describe
from ..registry import public


@public(method=True)
def hash_tensor(input: Tensor, dim=None, *, keepdim: bool = False,  # noqa: A002
                mode: int = 0) -> Tensor:
    """The xor-sum of input's elements' 64-bit patterns over dim (all dims when None or ())."""
    if mode != 0:
        raise ArgumentError(f"hash_tensor: unknown mode {mode} (only 0, the xor sum)",
                            op="hash_tensor")
    if input.dtype.is_complex:  # PyTorch hashes real dtypes only
        from ..elementwise.complex_parts import refuse_complex

        refuse_complex("hash_tensor", input, hint="hash view_as_real(x) instead")
    all_dims = dim is None or dim == () or input.ndim == 0  # a 0-d input takes dim 0 or -1
    if input.ndim == 0 and dim not in (None, (), 0, -1, (0,), (-1,)):
        normalize_dims(dim, 1, "hash_tensor")  # raises for the dims a 0-d tensor lacks
    dims = tuple(range(input.ndim)) if all_dims else normalize_dims(dim, input.ndim,
                                                                    "hash_tensor")
    if all_dims and input.numel() == 0:
        raise ShapeRuntimeError("hash_tensor: expected the reduction dim to be specified for "
                                "an empty input", op="hash_tensor",
                                operands=[("input", describe(input))])
    for d in dims:
        if input.shape[d] == 0:
            raise ShapeIndexError(f"hash_tensor: expected reduction dim {d} to have non-zero "
                                  "size", op="hash_tensor", operands=[("input", describe(input))])
    shape = tuple(1 if i in dims else s for i, s in enumerate(input.shape)) if keepdim else \
        tuple(s for i, s in enumerate(input.shape) if i not in dims)
    if input._data is None:  # meta: the shape alone
        return Tensor._make(None, shape, _dt.uint64, input.device)
    xp, a = input.device.xp, input._data
    u64 = _dt.uint64.np
    wide = xp.array(a, dtype=_dt.float64.np if a.dtype.kind == "f" or a.dtype.name ==
                    "bfloat16" else _dt.int64.np, order="C")  # a copy, 0-d kept 0-d
    bits = wide.view(u64)
    out = xp.bitwise_xor.reduce(bits, axis=dims, keepdims=keepdim) if dims else bits
    out = xp.array(out, dtype=u64, order="C").reshape(shape)
    return Tensor._make(out, shape, _dt.uint64, input.device)
