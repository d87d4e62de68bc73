"""Index arrays: planned on the host, and added at on a device.

Positions computed from sizes or from a user's list (pad's source rows, as_strided's flat
positions, a list index) are made with `host`, the cpu device's namespace, and moved with
`device.from_numpy` (free on cpu), so the plan also works on meta, where the device makes
no arrays. `ufunc_at` is NumPy's `add.at` (and `multiply.at`, ...) through any namespace.
"""

from __future__ import annotations

from ... import dtypes as _dt
from ...device import cpu

host = cpu.xp  # the host's array namespace: index plans, not tensor data
INTP = _dt.int64.np  # index arrays are int64 (NumPy's intp on 64-bit hosts)


def ufunc_at(xp, name: str, out, key, values) -> None:
    """out[key] = name(out[key], values) in place, repeated positions applied in turn
    (NumPy's `ufunc.at`): `xp`'s own where it has one, else one pass per repeat."""
    fn = getattr(xp, name)
    at = getattr(fn, "at", None)
    if at is not None:
        at(out, key, values)
        return
    # One pass per occurrence: the k-th entry naming each position is applied in pass k,
    # where no position repeats, so every element sees the same operations in the same
    # order as ufunc.at gives it (bitwise equal results).
    pos = xp.arange(out.size).reshape(out.shape)[key]
    flat = pos.reshape(-1)
    n = flat.shape[0]
    if not n:
        return
    vals = xp.broadcast_to(xp.asarray(values), pos.shape).reshape(-1)
    order = xp.argsort(flat, kind="stable")
    ranked = flat[order]
    rank = xp.empty_like(order)
    rank[order] = xp.arange(n) - xp.searchsorted(ranked, ranked, side="left")
    for k in range(int(rank.max()) + 1):
        pick = rank == k
        where = xp.unravel_index(flat[pick], out.shape)
        out[where] = fn(out[where], vals[pick])


def add_at(xp, out, key, values) -> None:
    """out[key] += values in place, repeated positions adding up (NumPy's `add.at`)."""
    ufunc_at(xp, "add", out, key, values)
