"""Rich tables as text at the terminal's width, and as HTML for notebooks (`_repr_html_`)."""

from __future__ import annotations

import html
import io
import os
import shutil
import sys


def terminal_width() -> int:
    """The width to print at: $COLUMNS, else the terminal's, else 100 (a pipe, a file)."""
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        if sys.stdout.isatty():
            return shutil.get_terminal_size((100, 24)).columns
    except (AttributeError, ValueError):  # no stdout, or a closed one
        pass
    return 100


def to_text(renderables, width: int | None = None) -> str:
    """Plain text of rich renderables, folded to `width` columns (default: the terminal's)."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width or terminal_width(), force_terminal=False,
                      color_system=None, highlight=False)
    for r in renderables:
        console.print(r)
    return buf.getvalue().rstrip("\n")


def to_html(renderables) -> str:
    """An HTML fragment: each rich Table as a <table> (title, header, rows, caption), the rest
    (strings, rich Text) as paragraphs."""
    from rich.table import Table

    out = ['<div class="shapeflow">']
    for r in renderables:
        if isinstance(r, Table):
            out.append(_table(r))
        else:
            out.append(f"<p>{_esc(r)}</p>")
    out.append("</div>")
    return "\n".join(out)


def _table(t) -> str:
    rows = [list(c.cells) for c in t.columns]
    align = ['text-align: right' if c.justify == "right" else 'text-align: left'
             for c in t.columns]
    parts = ["<table>"]
    if t.title:
        parts.append(f'<caption style="caption-side: top; text-align: left">'
                     f"<b>{_esc(t.title)}</b></caption>")
    parts.append("<thead><tr>" + "".join(
        f'<th style="{a}">{_esc(c.header)}</th>' for c, a in zip(t.columns, align))
        + "</tr></thead><tbody>")
    for i in range(t.row_count):
        parts.append("<tr>" + "".join(
            f'<td style="{a}; white-space: pre">{_esc(col[i])}</td>'
            for col, a in zip(rows, align)) + "</tr>")
    parts.append("</tbody></table>")
    if t.caption:
        parts.append(f"<p>{_esc(t.caption)}</p>")
    return "\n".join(parts)


def _esc(x) -> str:
    return html.escape(getattr(x, "plain", None) or str(x))
