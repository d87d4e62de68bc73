"""Printing sizes people read: `1.5 MiB`, `618.1 KiB × B`, `12.3M`."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n) -> str:
    """`1.5 MiB` for a number; `618.1 KiB × B` for one symbolic term; else the expression."""
    if not isinstance(n, (int, float)):
        terms = getattr(n, "_terms", ())
        if len(terms) == 1 and type(terms[0][1]) is int and terms[0][1] > 1:
            from ..symbolic import exact_div

            c = terms[0][1]  # c * B*L: the bytes per unit of the symbols
            unit = format_bytes(c) if c >= 1024 else f"{c} bytes"  # not "400 B × B"
            return f"{unit} × {exact_div(n, c)}"
        return f"({n}) B" if hasattr(n, "_terms") else f"{n} B"
    x = float(n)
    for unit in _UNITS:
        if abs(x) < 1024 or unit == _UNITS[-1]:
            return f"{round(n):,} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    raise AssertionError("unreachable")


def format_count(n: int) -> str:
    """`7.1M`, `12.3k`, `96`."""
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)
