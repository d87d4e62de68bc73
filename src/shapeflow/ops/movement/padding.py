"""Constant values written by a mask (masked_fill) or around the edges (pad)."""

from __future__ import annotations

from ... import dtypes as _dt
from ...errors import DTypeError, ShapeRuntimeError
from ...shape import broadcast_shapes
from ...tensor import Tensor, describe
from ..base import X1, Op, apply
from ..registry import public
from .index_arrays import host


class MaskedFill(Op):
    name = "masked_fill"

    def __init__(self, value) -> None:
        self.value = value

    def infer(self, x, mask):
        if mask.dtype is not _dt.bool_:
            raise DTypeError(f"masked_fill: the mask must be bool, got {mask.dtype}",
                             op="masked_fill", operands=[("input", describe(x)),
                                                         ("mask", describe(mask))],
                             hint="compare first (x > 0), or convert with .bool()")
        shape = broadcast_shapes(x.shape, mask.shape, "masked_fill", ("input", "mask"))
        return shape, x.dtype

    def saved(self, x, mask, out):
        return (X1,)

    def forward(self, x, mask):
        xp = self.device.xp
        return xp.where(mask, xp.asarray(self.value).astype(x.dtype), x)

    def backward(self, g):
        (mask,) = self.saved_tensors
        return apply(MaskedFill(0), g, mask), None


class MaskedFillTensor(MaskedFill):
    """masked_fill with a 0-d tensor value, which gets the gradient of the places it fills."""

    def __init__(self) -> None:
        pass

    def infer(self, x, mask, value):
        return MaskedFill.infer(self, x, mask)

    def saved(self, x, mask, value, out):
        return (X1,)

    def forward(self, x, mask, value):
        return self.device.xp.where(mask, value.astype(x.dtype), x)

    def backward(self, g):
        (mask,) = self.saved_tensors
        kept = apply(MaskedFill(0), g, mask)
        gv = None
        if self.needs_grad(2):
            _, _, dtype = self.next[6:9]
            gv = (g - kept).sum().to(dtype)  # g summed over the filled places
        return kept, None, gv


@public(method=True)
def masked_fill(x: Tensor, mask: Tensor, value) -> Tensor:
    """x with value where mask (broadcast) is true; a tensor value must be 0-d."""
    if isinstance(mask, (host.ndarray, host.generic)):  # a host NumPy mask: onto x's device
        m = host.asarray(mask)
        mask = Tensor._make(x.device.from_numpy(m), m.shape, _dt.from_numpy_dtype(m.dtype),
                            x.device)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ShapeRuntimeError(
                f"masked_fill: a tensor value must be 0-d, got {describe(value)}",
                op="masked_fill", operands=[("value", describe(value))],
                hint="pass a number, a 0-d tensor (v.squeeze()), or use where(mask, v, x)")
        if value.requires_grad:
            return apply(MaskedFillTensor(), x, mask, value)
        value = value.item()
    return apply(MaskedFill(value), x, mask)


@public(sf=False, method=True)
def masked_fill_(t: Tensor, mask: Tensor, value) -> Tensor:
    from ..inplace import inplace

    return inplace(t, "masked_fill_", masked_fill, mask, value)


class Pad(Op):
    """Constant padding (negative amounts crop), pads given last dim first as F.pad."""

    name = "pad"

    def __init__(self, pad, value=0) -> None:
        self.pad, self.value = tuple(pad), value

    def infer(self, x):
        p = self.pad
        if len(p) % 2:
            raise ShapeRuntimeError(f"pad: the padding length must be divisible by 2, got {p}",
                                    op="pad")
        if len(p) // 2 > x.ndim:
            raise ShapeRuntimeError(
                f"pad: {len(p)} pad values need at least {len(p) // 2} dims, got "
                f"{describe(x)}", op="pad", operands=[("input", describe(x))])
        pairs = [(0, 0)] * x.ndim
        for i in range(len(p) // 2):
            pairs[x.ndim - 1 - i] = (p[2 * i], p[2 * i + 1])
        self.pairs = pairs
        shape = []
        for s, (a, b) in zip(x.shape, pairs):
            n = s + a + b
            kept = s + min(a, 0) + min(b, 0)  # negative pads crop the input first
            if type(kept) is int and kept < 0:
                raise ShapeRuntimeError(f"pad: padding {p} crops more than the size {s} of a dim",
                                        op="pad", operands=[("input", describe(x))])
            if type(n) is int and n < 0:
                raise ShapeRuntimeError(f"pad: padding {p} makes a dim of size {s} negative",
                                        op="pad", operands=[("input", describe(x))])
            shape.append(n)
        return tuple(shape), x.dtype

    def forward(self, x):
        if any(a < 0 or b < 0 for a, b in self.pairs):
            x = x[tuple(slice(max(-a, 0), n - max(-b, 0)) for (a, b), n in
                        zip(self.pairs, x.shape))]
        width = [(max(a, 0), max(b, 0)) for a, b in self.pairs]
        xp = self.device.xp
        return xp.pad(x, width, constant_values=xp.asarray(self.value).astype(x.dtype))

    def backward(self, g):
        return (apply(Pad(tuple(-v for v in self.pad), 0), g),)


def _pad_index(n: int, a: int, b: int, mode: str):
    """Source positions (a host array) for a dim of size n padded by (a, b); negative pads
    crop, as PyTorch."""
    if n + a + b <= 0:
        raise ShapeRuntimeError(f"pad: padding ({a}, {b}) leaves nothing of a dim of size {n}",
                                op="pad")
    if mode == "circular":  # PyTorch crops first, then wraps around what is left
        lo, hi = max(-a, 0), n - max(-b, 0)
        m = hi - lo
        if m <= 0 or a > n or b > n:  # (PyTorch reads uninitialized memory for m == 0)
            raise ShapeRuntimeError(
                f"pad: circular padding ({a}, {b}) must not exceed the dim size {n} and must "
                f"leave some of it", op="pad")
        return lo + host.arange(-max(a, 0), m + max(b, 0)) % m
    i = host.arange(-a, n + b)  # reflect and replicate index the whole dim
    if mode == "reflect":
        if a >= n or b >= n:
            raise ShapeRuntimeError(
                f"pad: reflect padding ({a}, {b}) must be smaller than the dim size {n}",
                op="pad")
        period = 2 * (n - 1)
        j = host.abs(i) % period if period else host.zeros_like(i)
        return host.where(j >= n, period - j, j)
    return host.clip(i, 0, n - 1)


def _reflect_fill(out, pairs) -> None:
    """Fill the edges of out, its interior already written, with the interior's reflection,
    one padded dim at a time from the last (later dims copy whole, already padded planes)."""
    for d in range(out.ndim - 1, -1, -1):
        a, b = pairs[d]
        if not (a or b):
            continue
        n = out.shape[d] - a - b
        lead = (slice(None),) * d
        if a:
            out[lead + (slice(0, a),)] = out[lead + (slice(2 * a, a, -1),)]
        if b:
            out[lead + (slice(a + n, a + n + b),)] = \
                out[lead + (slice(a + n - 2, a + n - 2 - b if a + n - 2 - b >= 0 else None,
                                  -1),)]


def _reflect_fold(g, pairs):
    """The adjoint of _reflect_fill: each edge entry added back to the interior entry it
    copied, then the interior cut out (dims first to last: the reverse of the fill)."""
    for d in range(g.ndim):
        a, b = pairs[d]
        if not (a or b):
            continue
        n = g.shape[d] - a - b
        lead = (slice(None),) * d
        gi = g[lead + (slice(a, a + n),)].copy()
        if a:
            gi[lead + (slice(1, a + 1),)] += g[lead + (slice(a - 1, None, -1),)]
        if b:
            gi[lead + (slice(n - 1 - b, n - 1),)] += \
                g[lead + (slice(a + n + b - 1, a + n - 1, -1),)]
        g = gi
    return g


class ReflectPad(Op):
    """Reflection padding (the edge not repeated) of the trailing dims, pads >= 0 and below
    each dim's size: slice copies forward and slice adds backward (no index arrays)."""

    name = "reflection_pad"

    def __init__(self, pairs) -> None:
        self.pairs = tuple(pairs)  # (before, after) for every dim of the input

    def infer(self, x):
        return tuple(s + a + b for s, (a, b) in zip(x.shape, self.pairs)), x.dtype

    def forward(self, x):
        out = self.device.xp.empty(tuple(s + a + b for s, (a, b) in zip(x.shape, self.pairs)),
                                   x.dtype)
        out[tuple(slice(a, a + s) for s, (a, _) in zip(x.shape, self.pairs))] = x
        _reflect_fill(out, self.pairs)
        return out

    def backward(self, g):
        return (apply(ReflectPadBackward(self.pairs), g),)


class ReflectPadBackward(Op):
    """The gradient of ReflectPad (its adjoint); its own gradient is ReflectPad again."""

    name = "reflection_pad_backward"

    def __init__(self, pairs) -> None:
        self.pairs = tuple(pairs)

    def infer(self, g):
        return tuple(s - a - b for s, (a, b) in zip(g.shape, self.pairs)), g.dtype

    def forward(self, g):
        return self.device.xp.ascontiguousarray(_reflect_fold(g, self.pairs))

    def backward(self, gg):
        return (apply(ReflectPad(self.pairs), gg),)


def _reflect_pairs(x: Tensor, pad: tuple):
    """Per-dim (before, after) for reflect padding that ReflectPad covers, else None."""
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        d, a, b = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        n = x.shape[d]
        if type(n) is not int or a < 0 or b < 0 or (a or b) and not (a < n and b < n):
            return None
        pairs[d] = (a, b)
    return pairs


@public()
def pad(x: Tensor, pad, mode: str = "constant", value=0) -> Tensor:
    """F.pad: pad = (left, right) for the last dim, then the one before, ..."""
    pad = tuple(pad)
    if mode == "constant":
        return apply(Pad(pad, 0 if value is None else value), x)
    if mode not in ("reflect", "replicate", "circular"):
        raise ShapeRuntimeError(f"pad: unknown mode {mode!r}", op="pad",
                                hint="use 'constant', 'reflect', 'replicate' or 'circular'")
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        Pad(pad).infer(x)  # raises, as constant padding; a crop past the edge is fine here
    if mode == "reflect" and any(pad):
        pairs = _reflect_pairs(x, pad)
        if pairs is not None:
            return apply(ReflectPad(pairs), x)
    from ..index.dim_index import index_select  # here: ops/index builds on movement

    for i in range(len(pad) // 2):
        d, a, b = x.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        if a == 0 and b == 0:
            continue
        n = x.shape[d]
        if type(n) is not int or n == 0:
            raise ShapeRuntimeError(f"pad: {mode} padding needs a concrete non-empty dim, "
                                    f"got {n}", op="pad")
        idx = _pad_index(n, a, b, mode)
        it = Tensor._make(x.device.from_numpy(idx), idx.shape, _dt.int64, x.device)
        x = index_select(x, d, it)
    return x

