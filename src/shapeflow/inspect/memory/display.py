"""Printing a memory report (a rich table) and drawing it (a matplotlib bar chart)."""

from __future__ import annotations

from ...errors import ShapeflowError
from ..render import to_text
from ..units import bytes_cell, format_count

_KIND_TEXT = {
    "layer inputs": "layer inputs (kept for weight grads)",
    "attention": "attention probabilities",
    "attention outputs": "attention outputs + row logsumexp (flash)",
    "activation inputs": "activation-function inputs",
    "dropout masks": "dropout masks",
    "normalization stats": "normalization statistics",
    "recurrent gates": "recurrent gates (every time step's)",
    "other": "other",
}


def _top_rows(rep) -> list:
    """The first level with more than one module (an MLP's Sequential opens up), runs of one
    kind (the blocks) merged into one line."""
    depth = 1
    while sum(r.depth == depth for r in rep.by_module) == 1 and any(
            r.depth == depth + 1 for r in rep.by_module):
        depth += 1
    rows = [r for r in rep.by_module if r.depth == depth]
    out = []
    for r in rows:
        prev = out[-1] if out else None
        stem, _, idx = r.path.rpartition(".")
        if prev and idx.isdigit() and prev["stem"] == stem and prev["kind"] == r.kind:
            prev["n"] += 1
            prev["last"] = idx
            prev["act"] = prev["act"] + r.activations
            prev["params"] += r.params
            continue
        out.append({"stem": stem if idx.isdigit() else None, "first": idx, "last": idx, "n": 1,
                    "kind": r.kind, "path": r.path, "act": r.activations, "params": r.params})
    return out


def render_report(rep, width: int | None = None) -> str:
    """The report as text, `width` columns wide (default: the terminal's)."""
    return to_text(report_parts(rep), width)


def report_parts(rep) -> list:
    """The report's tables (and a note on parameters the loss never reaches), for rich."""
    from rich.table import Table

    train = rep.mode == "train"
    modes = ""
    if rep.recompute == "selective":
        modes += ", recomputing attention cores"
    if rep.checkpoint:
        modes += ", checkpointing " + rep.checkpoint
    title = (f"{rep.model}, {'training step' if train else 'inference'}: {rep.precision}, "
             f"optimizer {rep.optimizer}{modes}")
    t = Table()  # the title goes above it, as a line: a title would wrap to the table's width
    t.add_column("what", style="bold")
    t.add_column("bytes", justify="right", no_wrap=True)
    t.add_column("why")
    t.add_row("parameters", bytes_cell(rep.params), f"{format_count(rep.param_count)} "
              "weights (tied ones once) and buffers")
    if train:
        t.add_row("gradients", bytes_cell(rep.grads), "one per trained parameter")
        t.add_row("optimizer state", bytes_cell(rep.optimizer_state),
                  "moments / momentum" + (" + fp32 master weights" if
                                          rep.precision.endswith("-true") else ""))
        t.add_row("activations", bytes_cell(rep.activations),
                  "what backward keeps (saved by each op, once each)" + (
                      "; 16-bit weight copies included" if rep.precision.endswith("-mixed")
                      else ""))
        if rep.activations_without_checkpoint is not None:
            what = "blocks" if rep.recompute == "full" else "attention cores" if (
                rep.checkpoint == "") else "attention cores and blocks"
            t.add_row("  without recomputation", bytes_cell(
                rep.activations_without_checkpoint), f"recomputing {what} saves the rest")
    t.add_row("inputs", bytes_cell(rep.inputs), "the batch")
    where = rep.peak_phase
    t.add_row("peak", bytes_cell(rep.peak), "simulated: all live tensors at the busiest "
              "moment" + (f" (in the {where.name})" if where is not None and train else ""))
    if train:
        t.add_row("inference peak", bytes_cell(rep.inference_peak),
                  "the same forward under no_grad: nothing kept for backward")
    parts = [title, t]
    if train and rep.by_kind:
        k = Table(title="activations by kind", title_justify="left")
        k.add_column("kind")
        k.add_column("bytes", justify="right", no_wrap=True)
        for kind, v in rep.by_kind.items():
            k.add_row(_KIND_TEXT.get(kind, kind), bytes_cell(v))
        parts.append(k)
    if train and rep.timeline:
        parts.append(_timeline(rep))
    rows = _top_rows(rep)
    if rows:
        m = Table(title="by module", title_justify="left")
        m.add_column("module")
        m.add_column("kind")
        m.add_column("params", justify="right", no_wrap=True)
        if train:
            m.add_column("activations", justify="right", no_wrap=True)
        for r in rows:
            name = r["path"] if r["n"] == 1 else f"{r['stem']}.{r['first']}-{r['last']}"
            kind = r["kind"] if r["n"] == 1 else f"{r['kind']} x {r['n']}"
            cells = [name, kind, bytes_cell(r["params"])]
            if train:
                cells.append(bytes_cell(r["act"]))
            m.add_row(*cells)
        parts.append(m)
    if rep.unreached:
        names = ", ".join(rep.unreached[:6]) + (" ..." if len(rep.unreached) > 6 else "")
        parts.append(f"note: the loss never reaches {len(rep.unreached)} parameter(s) "
                     f"({names}): they get no gradient and no optimizer state")
    return parts


def _timeline(rep):
    """Per phase of the step: its peak, and what ran at that moment."""
    from rich.table import Table

    top = rep.peak_phase
    k = Table(title="timeline: the busiest moment of each phase", title_justify="left")
    k.add_column("phase")
    k.add_column("peak", justify="right", no_wrap=True)
    k.add_column("at")
    for phase in rep.timeline:
        mark = " <- peak" if phase is top else ""
        k.add_row(phase.name + mark, bytes_cell(phase.peak), phase.where or "")
    return k


def render_plan(plan, width: int | None = None) -> str:
    """The per-device plan as text, `width` columns wide (default: the terminal's)."""
    return to_text(plan_parts(plan), width)


def plan_parts(plan) -> list:
    """The per-device plan's table, for rich."""
    from rich.table import Table

    layout = f"{plan.devices} device(s): data parallel {plan.data_parallel}"
    if plan.tensor_parallel > 1:
        layout += f", tensor parallel {plan.tensor_parallel}"
        if plan.sequence_parallel:
            layout += " + sequence parallel"
    if plan.zero:
        layout += f", ZeRO stage {plan.zero}"
    t = Table(min_width=60)  # its title above it: a title would wrap to the table's width
    t.add_column("what", style="bold")
    t.add_column("bytes", justify="right", no_wrap=True)
    rows = [("parameters", plan.params), ("gradients", plan.grads),
            ("optimizer state", plan.optimizer_state), ("model states", plan.model_states),
            ("activations", plan.activations)]
    if plan.comm_buffers:
        rows.append(("DDP gradient buckets", plan.comm_buffers))
    rows.append(("total", plan.total))
    if plan.peak is not None:
        rows.append(("peak of the step", plan.peak))
    for name, v in rows:
        t.add_row(name, bytes_cell(v))
    return [f"per device: {layout}", t]


def plot_report(rep, path) -> None:
    """Stacked bars, train vs inference, by component (symbolic reports: call subs first)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ShapeflowError("MemoryReport.plot needs matplotlib", hint="pip install "
                             "'shapeflow[plot]'") from None
    values = [rep.params, rep.grads, rep.optimizer_state, rep.activations, rep.peak,
              rep.inference_peak]
    if not all(isinstance(v, (int, float)) for v in values):
        raise ShapeflowError("MemoryReport.plot: the report has symbolic sizes",
                             hint="plot rep.subs(B=...) at concrete sizes")
    other_train = max(rep.peak - rep.params - rep.grads - rep.optimizer_state -
                      rep.activations, 0)
    other_infer = max(rep.inference_peak - rep.params, 0)
    parts = [("parameters", rep.params, rep.params), ("gradients", rep.grads, 0),
             ("optimizer state", rep.optimizer_state, 0),
             ("saved activations", rep.activations, 0),
             ("inputs and temporaries", other_train, other_infer)]
    scale, unit = 1, "B"
    for s, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if rep.peak >= s:
            scale, unit = s, u
            break
    fig, ax = plt.subplots(figsize=(5, 4))
    bottoms = [0.0, 0.0]
    for name, tr, inf in parts:
        vals = [tr / scale, inf / scale]
        ax.bar(["train", "inference"], vals, bottom=bottoms, label=name)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    ax.set_ylabel(unit)
    ax.set_title(f"{rep.model}: peak memory ({rep.precision})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)
