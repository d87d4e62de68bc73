"""`sf.summary(model, *inputs)`: the shape chain and a per-module table, with or without data.

With meta (or symbolic) inputs the model runs on the meta device: shapes, parameter counts
and the bytes kept for backward come out without a single element computed, and with
symbolic dims the byte counts are expressions in them.
"""

from __future__ import annotations

import copy

from ..device import meta
from ..ops import base
from ..shape import format_shape
from ..tensor import Tensor
from . import trace
from .meta import meta_copy
from .units import bytes_cell, format_bytes


class Summary:
    """Rows (path, kind, input_shapes, output_shape, params, param_bytes, saved_bytes)."""

    def __init__(self, model, inputs, rows: list, input_name: str) -> None:
        self.model_kind = type(model).__name__
        self.input_shapes = [tuple(x.shape) for x in inputs if isinstance(x, Tensor)]
        self.rows = rows
        self.input_name = input_name
        root = rows[0] if rows and rows[0].path == "" else None
        self.total_params = root.params if root else sum(r.params for r in rows)
        self.total_param_bytes = root.param_bytes if root else 0
        self.total_saved_bytes = root.saved_bytes if root else sum(r.saved_bytes for r in rows)
        self.output_shape = root.output_shape if root else None

    def chain_rows(self) -> list:
        """The top level of the chain: modules called directly by the model's forward."""
        return [r for r in self.rows if r.depth == 1]

    def chain(self) -> str:
        """The seed's format: one line per step, `name: [B, 3, H, W]`."""
        lines = [(self.input_name, self.input_shapes[0] if self.input_shapes else None)]
        lines += [(r.path, r.output_shape) for r in self.chain_rows()]
        width = max(len(n) for n, _ in lines) + 1
        return "\n".join(f"{n + ':':<{width}} {format_shape(s) if s is not None else '?'}"
                         for n, s in lines)

    def subs(self, **values) -> Summary:
        """This summary with symbolic dims bound to numbers."""
        out = copy.copy(self)
        out.rows = []
        for r in self.rows:
            nr = copy.copy(r)
            nr.input_shapes = [_subs_shape(s, values) for s in r.input_shapes]
            nr.output_shape = _subs_shape(r.output_shape, values)
            nr.saved_bytes = _subs(r.saved_bytes, values)
            out.rows.append(nr)
        out.input_shapes = [_subs_shape(s, values) for s in self.input_shapes]
        out.total_saved_bytes = _subs(self.total_saved_bytes, values)
        out.output_shape = _subs_shape(self.output_shape, values)
        return out

    def table(self):
        """A rich Table: one row per module call (shapes, parameters, bytes saved)."""
        from rich.table import Table

        t = Table(title=f"{self.model_kind} summary", show_lines=False)
        for col in ("module", "kind", "input", "output", "params", "saved for backward"):
            right = col in ("params", "saved for backward")
            # names and numbers stay whole; shapes and byte expressions wrap at spaces
            t.add_column(col, justify="right" if right else "left",
                         no_wrap=col in ("module", "kind", "params"))
        parents: list[str] = []  # path of the enclosing row at each depth
        for r in self.rows:
            del parents[r.depth:]
            parent = parents[-1] if parents else ""
            # relative to the enclosing called module: `blocks.0` under a ViT, `qkv` under attn
            name = r.path[len(parent) + 1:] if parent and r.path.startswith(parent + ".") else (
                r.path or "(model)")
            parents.append(r.path)
            t.add_row("  " * r.depth + name,
                      r.kind, ", ".join(format_shape(s) for s in r.input_shapes),
                      format_shape(r.output_shape) if r.output_shape is not None else "",
                      f"{r.params:,}", bytes_cell(r.saved_bytes))
        t.caption = (f"{self.total_params:,} parameters ({format_bytes(self.total_param_bytes)})"
                     f"; {format_bytes(self.total_saved_bytes)} kept for backward")
        return t

    def __str__(self) -> str:
        """The table as text, at the terminal's width (cells wrap to fit)."""
        from .render import to_text

        return to_text([self.__rich__()])

    def __rich__(self):
        """Printed by rich (`console.print(s)`): the table, fitted to the console's width
        (narrow: without the input, then kind, then saved columns; no number is cut)."""
        from .render import Fitted

        return Fitted(self.table(), drop=("input", "kind", "saved for backward"))

    def _repr_html_(self) -> str:
        """The chain and the table as HTML, for notebooks."""
        import html

        from .render import to_html

        return (f"<pre>{html.escape(self.chain())}</pre>\n" if self.input_shapes else
                "") + to_html([self.table()])

    def __repr__(self) -> str:
        return f"<Summary of {self.model_kind}: {len(self.rows)} module calls>"


def _subs(x, values):
    return x.subs(**values) if hasattr(x, "subs") else x


def _subs_shape(shape, values):
    return None if shape is None else tuple(_subs(s, values) for s in shape)


def summary(model, *inputs, **kwargs) -> Summary:
    """Run model(*inputs) once, recording every module call's shapes and what it saves."""
    from ..autograd.grad_mode import enable_grad

    # meta itself: meta inputs ask for a summary of a meta copy (meta_copy makes meta)
    if any(isinstance(x, Tensor) and x.device is meta for x in inputs) and any(
            p.device is not meta for p in model.parameters()):
        model = meta_copy(model)
    seen: set[int] = set()
    # a buffer is known by its version counter, which views and detach() share with it
    params = {id(p._version) for p in model.parameters()}

    def observe(node, node_inputs, out):
        state = trace.current_state()
        if state is None or not state.open_rows:
            return
        for _, t in base.held(node):
            key = id(t._version)
            if key in params or key in seen:
                continue  # a parameter, or a buffer already counted
            seen.add(key)
            # the storage it keeps alive (a view keeps its whole base), as memory.report counts
            nbytes = base.storage_nbytes(t)
            for row in state.open_rows:
                row.saved_bytes = row.saved_bytes + nbytes

    base.add_observer(observe)
    try:
        with enable_grad():
            state_rows = _run(model, inputs, kwargs)
    finally:
        base.remove_observer(observe)
    for row in state_rows:
        ps = list(row.module.parameters())
        row.params = sum(p.numel() for p in ps)
        row.param_bytes = sum(p.numel() * p.dtype.itemsize for p in ps)
    return Summary(model, inputs, state_rows, trace.input_name(model))


def _run(model, inputs, kwargs):
    if trace.current_state() is not None:
        raise RuntimeError("summary() cannot run inside another module call")
    rows_holder = {}

    def impl(*a, **k):
        rows_holder["state"] = trace.current_state()
        return model._call_impl(*a, **k)

    trace.call_module(model, impl, inputs, kwargs, collect_rows=True)
    return rows_holder["state"].rows
