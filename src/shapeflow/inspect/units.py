"""Printing sizes people read: `1.5 MiB`, `618.1 KiB × B`, `12.3M`.

`B` is often the batch dim, so bytes are never written `B`: `512 bytes`, `(3*L + 7) bytes`.
"""

from __future__ import annotations

_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n) -> str:
    """`1.5 MiB` for a number; `618.1 KiB × B + 2.0 KiB` for an expression in dims."""
    if isinstance(n, (int, float)):
        return _number(n)
    if hasattr(n, "terms") and not hasattr(n, "_terms"):  # a Max of expressions (a peak)
        return "max(" + ", ".join(format_bytes(t) for t in n.terms) + ")"
    terms = getattr(n, "_terms", None)
    if terms and all(type(c) is int and c > 0 for _, c in terms):
        return " + ".join(_term(n, m, c) for m, c in terms)
    return f"({n}) bytes"


def bytes_cell(n) -> str:
    """format_bytes for a table cell: one term a line, so a narrow column never splits one."""
    terms = getattr(n, "terms", None)
    if terms is not None and not hasattr(n, "_terms") and len(terms) > 3:
        # a peak over many moments: two of them and a count (the value itself has all)
        n = type(n)(terms[:2])
        return bytes_cell(n)[:-1] + f",\n… {len(terms) - 2} more)"
    return format_bytes(n).replace(" + ", "\n+ ").replace(", ", ",\n")


def _number(n) -> str:
    x = float(n)
    for unit in _UNITS:
        if abs(x) < 1024 or unit == _UNITS[-1]:
            return f"{round(n):,} bytes" if unit == "bytes" else f"{x:.1f} {unit}"
        x /= 1024
    raise AssertionError("unreachable")


def _term(n, mono, c: int) -> str:
    """One term c * B*L of an expression: `400 bytes × B*L`, `3.1 KiB × B`."""
    if not mono:
        return _number(c)
    from ..symbolic import _new

    dims = _new(((mono, 1),), n._facts, n._names)  # the monomial alone, as the Dim prints it
    return f"{_number(c)} × {dims}"


def format_count(n: int) -> str:
    """`7.1M`, `12.3k`, `96`."""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)
