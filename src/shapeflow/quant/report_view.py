"""A quantization report on screen (a rich table and its findings) and as a plot."""

from __future__ import annotations

import io
import math
import os
import shutil
import sys


def _db(v: float | None) -> str:
    if v is None:
        return ""
    if math.isinf(v):
        return "exact" if v > 0 else "-inf"
    return "nan" if math.isnan(v) else f"{v:.1f}"


def _num(v: float) -> str:
    return f"{v:.3g}"


def _range(r) -> str:
    return "" if r is None else f"{_num(r.min)}..{_num(r.max)}"


def _ratio(r) -> str:
    if r is None:
        return ""
    text = "inf" if math.isinf(r.outlier_ratio) else f"{r.outlier_ratio:.1f}"
    return text + (f" ({len(r.outlier_channels)} ch)" if r.outlier_channels else "")


def renderables(rep) -> list:
    """The table, then lines naming the output's error, the task's numbers, and the modules
    where error is introduced and amplified."""
    from rich.table import Table

    t = Table(title=f"quantization error, scheme {rep.scheme!r}: SQNR in dB against the float "
              "model (higher is better)", title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("module", no_wrap=True)
    for head in ("own", "propagated", "cos", "norm. L2", "amplif. dB", "|w| max",
                 "w max/med", "input range", "in max/med"):
        t.add_column(head, justify="right")
    for i, r in enumerate(rep.rows):
        t.add_row(str(i), r.name, _db(r.own.sqnr), _db(r.propagated.sqnr),
                  f"{r.propagated.cosine:.4f}", _num(r.propagated.normalized_l2),
                  f"{r.amplification_db:+.1f}",
                  "" if r.weight is None else _num(max(-r.weight.min, r.weight.max)),
                  _ratio(r.weight), _range(r.activation), _ratio(r.activation))
    o = rep.output
    t.add_row("", o.name, "", _db(o.propagated.sqnr), f"{o.propagated.cosine:.4f}",
              _num(o.propagated.normalized_l2), "", "", "", "", "", end_section=True)
    lines = [f"output SQNR {_db(rep.sqnr)} dB"]
    task = rep.task
    if task.top1_agreement is not None:
        lines.append(f"top-1 agreement with the float model {task.top1_agreement:.2%}")
    if task.accuracy_float is not None:
        lines.append(f"{'next-token ' if task.language_model else ''}accuracy "
                     f"{task.accuracy_float:.2%} float -> {task.accuracy_quant:.2%} "
                     f"quantized ({100 * (task.accuracy_quant - task.accuracy_float):+.2f} "
                     "points)")
    if task.loss_float is not None:
        line = (f"loss {task.loss_float:.4f} -> {task.loss_quant:.4f} "
                f"({task.loss_quant - task.loss_float:+.4f})")
        if task.language_model:
            line += (f", perplexity {task.perplexity_float:.3f} -> "
                     f"{task.perplexity_quant:.3f}")
        lines.append(line + ("" if task.language_model else " (cross-entropy)"))
    if rep.left_float:
        lines.append("left float (the scheme cannot store them): " + "; ".join(
            f"{n} ({why})" for n, why in rep.left_float.items()))
    lines.append("error introduced most by: " + ", ".join(
        f"{n} ({_db(r.own.sqnr)} dB own)" for n, r in
        ((n, next(r for r in rep.rows if r.name == n)) for n in rep.introduced())))
    amp = rep.amplified()
    lines.append("error amplified by: " + (", ".join(
        f"{n} ({next(r for r in rep.rows if r.name == n).amplification_db:+.1f} dB)"
        for n in amp) if amp else "no module (none makes the error it receives more than "
        "3 dB worse relative to the signal)"))
    return [t, *lines]


def _width() -> int:
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    try:
        if sys.stdout.isatty():
            return shutil.get_terminal_size((140, 24)).columns
    except (AttributeError, ValueError):
        pass
    return 140


def to_text(rep, width: int | None = None) -> str:
    """The report as plain text, `width` columns wide (default: the terminal's, else 140)."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, width=width or _width(), force_terminal=False,
                      color_system=None, highlight=False)
    for r in renderables(rep):
        console.print(r)
    return buf.getvalue().rstrip("\n")


def plot(rep, path=None):
    """SQNR through depth: own and propagated per module, the output's as a line."""
    from ..errors import ShapeflowError

    try:
        import matplotlib

        if path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ShapeflowError("QuantReport.plot needs matplotlib",
                             hint="pip install 'shapeflow[plot]'") from None

    def finite(v: float) -> float:
        return v if math.isfinite(v) else float("nan")  # a gap, not an infinite bar

    x = list(range(len(rep.rows)))
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(x) + 2), 4))
    ax.plot(x, [finite(r.own.sqnr) for r in rep.rows], "o-", label="own (only it quantized)")
    ax.plot(x, [finite(r.propagated.sqnr) for r in rep.rows], "s-",
            label="propagated (everything up to it quantized)")
    if math.isfinite(rep.sqnr):
        ax.axhline(rep.sqnr, color="gray", ls="--", label=f"output {rep.sqnr:.1f} dB")
    ax.set_xticks(x, [r.name for r in rep.rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("SQNR (dB)")
    ax.set_title(f"quantization error through depth, {rep.scheme}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig
