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
        console.print(r, crop=False)  # a Fitted table wider than the page stays whole
    return buf.getvalue().rstrip("\n")


def _plain(cell) -> str:
    from rich.text import Text

    return cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain


class Fitted:
    """A rich Table that fits its page without cutting a cell: the columns named in `drop`
    are left out, in order, until the others fit whole (they wrap only at spaces)."""

    def __init__(self, table, drop: tuple = ()) -> None:
        self.table = table
        self.drop = drop

    def __rich_console__(self, console, options):
        import copy

        table = copy.copy(self.table)
        table.columns = [copy.copy(c) for c in self.table.columns]
        width = options.max_width
        lows, highs = _ranges(table)
        dropped = []
        for name in self.drop:
            if sum(lows) + _overhead(table) <= width:
                break
            i = next((i for i, c in enumerate(table.columns) if _plain(c.header) == name), None)
            if i is not None:
                del table.columns[i], lows[i], highs[i]
                dropped.append(name)
        for i, column in enumerate(table.columns):
            column._index = i  # rich finds a column's padding by its position
        room = width - _overhead(table)
        if sum(highs) > room:  # each column its longest word, then all up to one level
            def widths(level: int) -> list:
                return [min(h, max(lo, level)) for lo, h in zip(lows, highs)]

            level = max((n for n in range(max(highs) + 1) if sum(widths(n)) <= room),
                        default=0)
            for column, w in zip(table.columns, widths(level)):
                column.width = w
        if dropped:
            note = f"(not shown at {width} columns: {', '.join(dropped)})"
            table.caption = f"{table.caption}\n{note}" if table.caption else note
        yield from console.render(table, options.update_width(
            max(width, sum(lows) + _overhead(table))))


def _overhead(table) -> int:
    """Columns a table takes beyond its cells' text: borders and padding."""
    return table._extra_width + sum(table._get_padding_width(i)
                                    for i in range(len(table.columns)))


def _ranges(table) -> tuple[list, list]:
    """Per column: its longest word (a no-wrap column: its longest line), its longest line."""
    from rich.cells import cell_len

    lows, highs = [], []
    for column in table.columns:
        texts = [_plain(column.header), *(_plain(c) for c in column.cells)]
        lines = [line for t in texts for line in t.splitlines()] or [""]
        words = lines if column.no_wrap else [w for line in lines for w in line.split()]
        lows.append(max((cell_len(w) for w in words), default=0))
        highs.append(max(cell_len(line) for line in lines))
    return lows, highs


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
