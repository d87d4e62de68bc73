"""`sf.graph(...)`: the computation graph as a drawing (the seed's Figure 2, from real nodes).

Two ways in. `graph(y)` walks a graph forward already recorded (root tensors back to the
leaves). `graph(model, *inputs)` traces one call: every op the call records, with the module
path it ran in; with meta (or symbolic) inputs the model runs on a meta copy, so edges carry
symbolic shapes (`[B, L, 64] f32`) and no element is computed.

Nodes are inputs, parameters (named by module path), constants and ops (named as users write
them: `matmul`, `softmax`, `layer_norm`); edges are the tensors flowing between them. What
backward keeps alive is marked: an op node says how many bytes it saves, and an edge whose
tensor it saves is drawn in red. `depth=k` collapses every module called at depth k into one
node; `backward=True` adds the gradient flow. `to_dot()` needs nothing; `render()` runs
Graphviz `dot`.
"""

from __future__ import annotations

import copy
import inspect as _inspect
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..autograd.grad_mode import enable_grad
from ..device import meta
from ..errors import ShapeflowError
from ..ops import base
from ..shape import format_shape
from ..tensor import Tensor
from . import trace as _trace
from .meta import meta_copy
from .units import format_bytes, format_count

__all__ = ["Graph", "Node", "Edge", "SavedTensor", "RenderError", "graph", "trace_call"]


class RenderError(ShapeflowError, RuntimeError):
    """Graphviz could not draw the graph (`dot` missing or failing)."""

    kind = "RenderError"


# ---- what the graph holds -----------------------------------------------------------------
@dataclass
class SavedTensor:
    """One tensor an op keeps for backward: `input 1`, `output` or an intermediate (`rstd`)."""

    what: str
    shape: tuple
    dtype: object
    kind: str  # base.LAYER_INPUT, ATTENTION, ... (what the memory report groups by)
    nbytes: object  # int, or a symbolic expression on meta
    key: int = 0  # identity of the memory (a version counter, shared by views)
    parameter: bool = False  # a parameter: kept anyway, so no memory beyond inference

    def __repr__(self) -> str:
        return (f"SavedTensor({self.what}, {_label(self.shape, self.dtype)}, "
                f"{format_bytes(self.nbytes)})")


@dataclass
class Node:
    """An input, parameter, constant, op, output, or (collapsed) module."""

    id: str
    kind: str  # "input" | "parameter" | "constant" | "op" | "output" | "module"
    name: str
    shape: tuple | None = None  # of the tensor it produces
    dtype: object = None
    stack: tuple = ()  # module paths it ran in, outermost first (the root model excluded)
    saved: list = field(default_factory=list)  # SavedTensor entries kept for backward
    recorded: bool = True  # False for an op a training step would not record (no grad flows)
    detail: str = ""  # extra text for the drawing (a scalar operand, a module's class)
    op: object = None  # the op instance (kind "op")

    @property
    def path(self) -> str:
        """The module path this node belongs to ("" at the model's top level)."""
        return self.stack[-1] if self.stack else ""

    @property
    def saved_bytes(self):
        """Bytes of everything it keeps for backward (parameters included)."""
        return _sum(s.nbytes for s in _dedup(self.saved))

    @property
    def activation_bytes(self):
        """Bytes it keeps that a forward without grad would not (parameters excluded)."""
        return _sum(s.nbytes for s in _dedup(self.saved) if not s.parameter)

    @property
    def label(self) -> str:
        lines = [self.name]
        if self.detail:
            lines.append(self.detail)
        if self.kind in ("input", "parameter", "constant", "output") and self.shape is not None:
            lines.append(_label(self.shape, self.dtype))
        if any(not s.parameter for s in self.saved):
            lines.append(f"saves {format_bytes(self.activation_bytes)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.kind}, {self.name!r})"


@dataclass
class Edge:
    """A tensor flowing from `src` to `dst` (kind "data"), or its gradient back ("grad")."""

    src: str
    dst: str
    shape: tuple
    dtype: object
    index: int = 0  # which input of dst it is
    kind: str = "data"
    saved: bool = False  # kept alive for backward (by dst, or by the op that made it)
    requires_grad: bool = False  # a gradient flows back along it
    key: object = 0  # identity of the tensor (edges of one tensor share it)

    @property
    def label(self) -> str:
        return _label(self.shape, self.dtype)

    def __repr__(self) -> str:
        arrow = "->" if self.kind == "data" else "~>"
        return f"Edge({self.src} {arrow} {self.dst}, {self.label}{', saved' if self.saved else ''})"


def _label(shape, dtype) -> str:
    """`[B, L, 64] f32`."""
    if shape is None:
        return ""
    short = getattr(dtype, "short", str(dtype))
    return f"{format_shape(shape)} {short}"


def _nbytes(shape, dtype):
    n = 1
    for s in shape:
        n = n * s
    return n * dtype.itemsize


def _sum(values):
    total = 0
    for v in values:
        total = total + v
    return total


def _dedup(saved):
    seen, out = set(), []
    for s in saved:
        if s.key not in seen:
            seen.add(s.key)
            out.append(s)
    return out


# ---- the graph ----------------------------------------------------------------------------
_STYLE = {  # kind -> (shape, fill, border)
    "input": ("box", "#d5e8d4", "#82b366"),
    "parameter": ("box", "#fff2cc", "#d6b656"),
    "constant": ("box", "#eeeeee", "#999999"),
    "op": ("ellipse", "#dae8fc", "#6c8ebf"),
    "output": ("box", "#f8cecc", "#b85450"),
    "module": ("box3d", "#e1d5e7", "#9673a6"),
}
_SAVED_COLOR = "#c0392b"


class Graph:
    """Nodes and edges of a computation graph, with module clusters; draw with `render`."""

    def __init__(self, nodes: list, edges: list, modules: dict | None = None,
                 params: set | None = None, module_params: dict | None = None) -> None:
        self.nodes: list[Node] = nodes
        self.edges: list[Edge] = edges
        self.modules = modules or {}  # path -> module class name (cluster labels)
        self.module_params = module_params or {}  # path -> number of parameters
        self._param_keys = params or set()  # version ids of parameters (not activation memory)
        for n in nodes:
            for saved in n.saved:
                saved.parameter = saved.key in self._param_keys

    # ---- looking things up -------------------------------------------------------------
    def node(self, name: str) -> Node:
        """The first node called `name` (KeyError if none)."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r} (nodes: {', '.join(n.name for n in self.nodes)})")

    def by_id(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def edges_between(self, src: str, dst: str) -> list:
        """Data edges from the node named src to the node named dst."""
        s, d = self.node(src).id, self.node(dst).id
        return [e for e in self.edges if e.kind == "data" and e.src == s and e.dst == d]

    @property
    def saved(self) -> list:
        """Every tensor kept for backward once (views of one tensor count once)."""
        return _dedup(s for n in self.nodes for s in n.saved)

    @property
    def saved_bytes(self):
        """Bytes backward keeps alive beyond the parameters (what training adds to inference)."""
        return _sum(s.nbytes for s in self.saved if not s.parameter)

    def __repr__(self) -> str:
        kinds: dict[str, int] = {}
        for n in self.nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
        parts = ", ".join(f"{v} {k}{'s' if v > 1 else ''}" for k, v in kinds.items())
        return (f"<Graph: {parts}; {sum(e.kind == 'data' for e in self.edges)} edges; "
                f"saves {format_bytes(self.saved_bytes)}>")

    # ---- transformations ---------------------------------------------------------------
    def collapse(self, depth: int) -> Graph:
        """A graph where each module called at depth `depth` (1 = the model's children) is one
        node; depth 0 makes the whole model one node."""
        if depth < 0:
            raise ValueError(f"depth must be >= 0, got {depth}")
        rep: dict[str, str] = {}
        groups: dict[str, Node] = {}
        order: list = []
        for n in self.nodes:
            if n.kind != "op" or (depth and len(n.stack) < depth):
                order.append(n)
                continue
            path = n.stack[depth - 1] if depth else ""
            m = groups.get(path)
            if m is None:
                name = path or self.modules.get("", "model")
                detail = self.modules.get(path, "") if path else ""
                count = self.module_params.get(path)
                if count:
                    params = f"{format_count(count)} params"
                    detail = f"{detail}, {params}" if detail else params
                m = groups[path] = Node(f"m{len(groups)}", "module", name, stack=n.stack[:max(
                    depth - 1, 0)], detail=detail, recorded=False)
                order.append(m)
            m.saved = m.saved + n.saved
            m.recorded = m.recorded or n.recorded
            rep[n.id] = m.id
        # a parameter or constant used only inside one collapsed module goes into it
        consumers: dict[str, set] = {}
        for e in self.edges:
            if e.kind == "data":
                consumers.setdefault(e.src, set()).add(rep.get(e.dst, e.dst))
        by_id = {m.id: m for m in groups.values()}
        nodes = []
        for n in order:
            users = consumers.get(n.id, set())
            if n.kind in ("parameter", "constant") and len(users) == 1:
                (target,) = users
                if target in by_id:
                    rep[n.id] = target
                    continue
            if n.kind in ("parameter", "constant") and depth:
                n = copy.copy(n)
                n.stack = n.stack[:depth - 1]
            nodes.append(n)
        edges, seen = [], {}
        for e in self.edges:
            if e.kind != "data":
                continue
            s, d = rep.get(e.src, e.src), rep.get(e.dst, e.dst)
            if s == d:
                continue
            key = (s, d, e.key)
            if key in seen:
                seen[key].saved = seen[key].saved or e.saved
                continue
            ne = copy.copy(e)
            ne.src, ne.dst = s, d
            seen[key] = ne
            edges.append(ne)
        return Graph(nodes, edges, self.modules, self._param_keys, self.module_params)

    def with_backward(self) -> Graph:
        """This graph plus a gradient edge against every edge a gradient flows along."""
        grads = [Edge(e.dst, e.src, e.shape, e.dtype, e.index, "grad", False, True, e.key)
                 for e in self.edges if e.kind == "data" and e.requires_grad]
        return Graph(self.nodes, [e for e in self.edges if e.kind == "data"] + grads,
                     self.modules, self._param_keys, self.module_params)

    # ---- output ------------------------------------------------------------------------
    def to_dot(self, rankdir: str = "TB") -> str:
        """Graphviz DOT source (no dependency needed)."""
        lines = [
            "digraph shapeflow {",
            f'  graph [rankdir={rankdir}, fontname="Helvetica", fontsize=11, nodesep=0.25, '
            'ranksep=0.35];',
            '  node [fontname="Helvetica", fontsize=10, margin="0.12,0.04", height=0.3];',
            '  edge [fontname="Helvetica", fontsize=9, color="#555555", arrowsize=0.7];',
        ]
        tree: dict[tuple, list] = {}
        children: dict[tuple, list] = {}
        for n in self.nodes:
            tree.setdefault(n.stack, []).append(n)
            for i in range(len(n.stack)):
                parent, child = n.stack[:i], n.stack[:i + 1]
                kids = children.setdefault(parent, [])
                if child not in kids:
                    kids.append(child)
        counter = [0]

        def emit(prefix: tuple, indent: str) -> None:
            for n in tree.get(prefix, ()):
                shape, fill, color = _STYLE[n.kind]
                style = "rounded,filled" if n.kind in ("input", "output") else "filled"
                if n.kind == "op" and not n.recorded:
                    style += ",dashed"  # a training step records no node here
                extra = ""
                if any(not x.parameter for x in n.saved):
                    color, extra = _SAVED_COLOR, ", penwidth=1.6"
                style = (f'shape={shape}, style="{style}", fillcolor="{fill}", '
                         f'color="{color}"{extra}')
                lines.append(f'{indent}{n.id} [label="{_esc(n.label)}", {style}];')
            for child in children.get(prefix, ()):
                counter[0] += 1
                path = child[-1]
                kind = self.modules.get(path)
                title = f"{path} ({kind})" if kind else path
                lines.append(f"{indent}subgraph cluster_{counter[0]} {{")
                lines.append(f'{indent}  label="{_esc(title)}"; labeljust=l; style="rounded,'
                             f'dashed"; color="#999999"; fontsize=10;')
                emit(child, indent + "  ")
                lines.append(f"{indent}}}")

        emit((), "  ")
        kinds = {n.id: n.kind for n in self.nodes}
        for e in self.edges:
            if e.kind == "data":
                attrs = [f'label=" {_esc(e.label)}"']
                if e.saved and kinds.get(e.src) != "parameter":
                    attrs.append(f'color="{_SAVED_COLOR}", fontcolor="{_SAVED_COLOR}", '
                                 "penwidth=1.6")
            else:
                attrs = [f'label=" grad {_esc(e.label)}"', 'style=dashed, color="#e67e22"',
                         'fontcolor="#e67e22", constraint=false']
            lines.append(f"  {e.src} -> {e.dst} [{', '.join(attrs)}];")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def render(self, path, format: str | None = None) -> Path:  # noqa: A002  (graphviz's name)
        """Draw the graph to `path` (svg, png, pdf... from the suffix; .dot writes the source)."""
        path = Path(path)
        fmt = (format or path.suffix.lstrip(".") or "svg").lower()
        if fmt in ("dot", "gv"):
            path.write_text(self.to_dot())
            return path
        data = _run_dot(self.to_dot(), fmt)
        path.write_bytes(data)
        return path

    def pipe(self, format: str = "svg") -> bytes:  # noqa: A002
        """The drawing as bytes (via `dot`)."""
        return _run_dot(self.to_dot(), format)

    def _repr_svg_(self):
        if shutil.which("dot") is None:
            return None  # Jupyter falls back to the repr
        return self.pipe("svg").decode("utf-8")


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _run_dot(source: str, fmt: str) -> bytes:
    dot = shutil.which("dot")
    if dot is None:
        raise RenderError(
            "rendering a graph needs Graphviz's `dot` program, which is not installed",
            op="render",
            hint="install the Debian package graphviz (apt-get install graphviz; brew install "
            "graphviz on macOS), or write the source with g.to_dot() / render('g.dot')")
    proc = subprocess.run([dot, f"-T{fmt}"], input=source.encode("utf-8"),
                          capture_output=True, check=False)
    if proc.returncode != 0:
        raise RenderError(f"dot -T{fmt} failed: {proc.stderr.decode(errors='replace').strip()}",
                          op="render", hint="formats dot knows include svg, png and pdf")
    return proc.stdout


# ---- tracing one call ---------------------------------------------------------------------
class Record:
    """One recorded op of a traced call: the node, its input tensors, output, module stack."""

    __slots__ = ("op", "inputs", "out", "stack")

    def __init__(self, op, inputs, out, stack) -> None:
        self.op, self.inputs, self.out, self.stack = op, inputs, out, stack


class Trace:
    """What one traced call did: records in order, its inputs and outputs, and leaf names."""

    def __init__(self) -> None:
        self.model = None  # the module that ran (a meta copy for meta inputs)
        self.records: list[Record] = []
        self.inputs: list[tuple] = []  # (name, tensor as the model saw it, requires grad)
        self.outputs: list[tuple] = []  # (name, tensor)
        self.names: dict[int, tuple] = {}  # id(tensor) -> (kind, name) for params, buffers
        self.version_names: dict[int, tuple] = {}  # id(version counter) -> (kind, name)
        self.modules: dict[str, str] = {}  # path -> class name
        self.module_objects: dict = {}  # path -> module
        self.result = None  # what the call returned

    def leaf(self, t: Tensor):
        """(kind, name) of a parameter, buffer or named tensor, else None."""
        hit = self.names.get(id(t))
        return hit if hit is not None else self.version_names.get(id(t._version))


def _is_meta(x) -> bool:
    # meta itself, not "a device without data": meta inputs ask for a trace on a meta copy
    return isinstance(x, Tensor) and x.device is meta


def _arg_names(fn, n: int) -> list:
    try:
        target = type(fn).forward if _is_module(fn) else fn
        params = list(_inspect.signature(target).parameters.values())
        if _is_module(fn):
            params = params[1:]
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                      p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    names = names[:n]
    return names + [f"input{i}" for i in range(len(names), n)]


def _is_module(fn) -> bool:
    from ..nn.module import Module

    return isinstance(fn, Module)


def _closure_tensors(fn) -> dict:
    """id -> name for the tensors a plain function reads from its closure or globals."""
    out: dict[int, str] = {}
    code = getattr(fn, "__code__", None)
    if code is None:
        return out
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, Tensor):
            out[id(v)] = name
    g = getattr(fn, "__globals__", {})
    for name in code.co_names:
        v = g.get(name)
        if isinstance(v, Tensor):
            out.setdefault(id(v), name)
    return out


def _alias(x: Tensor) -> Tensor:
    """x as a tensor that requires grad (same data and version), so every op on it records."""
    a = Tensor._make(x._data, x.shape, x.dtype, x.device)
    a._version = x._version
    a.requires_grad = True
    return a


def flatten_outputs(result) -> list:
    """(name, tensor) for each tensor a call returned; None entries (a missing loss) skipped."""
    if isinstance(result, Tensor):
        return [("output", result)]
    items = []
    if isinstance(result, dict):
        items = [(str(k), v) for k, v in result.items()]
    elif isinstance(result, (tuple, list)):
        items = [(f"output{i}", v) for i, v in enumerate(result)]
    flat = []
    for name, v in items:
        if isinstance(v, Tensor):
            flat.append((name, v))
        elif isinstance(v, (tuple, list, dict)):
            flat += [(f"{name}.{n}", t) for n, t in flatten_outputs(v)]
    if len(flat) == 1 and not isinstance(result, dict):
        flat = [("output", flat[0][1])]
    return flat


def trace_call(fn, *inputs, record_all: bool = True, **kwargs) -> Trace:
    """Run fn(*inputs, **kwargs) once with grad on, keeping every recorded op.

    A module with meta inputs runs as a meta copy. With `record_all`, float inputs are
    traced through an alias that requires grad, so the ops applied to them before any
    parameter are recorded too (the Trace remembers that the inputs themselves did not).
    """
    tr = Trace()
    if _is_module(fn):
        if any(_is_meta(x) for x in inputs) and any(
                t.device is not meta for t in list(fn.parameters()) + list(fn.buffers())):
            # (a model already on meta is traced as it is)
            fn = meta_copy(fn)
        tr.model = fn
        for name, m in fn.named_modules():
            tr.modules[name] = type(m).__name__
            tr.module_objects[name] = m
        tr.modules.setdefault("", type(fn).__name__)
        for name, p in fn.named_parameters():
            tr.names[id(p)] = ("parameter", name)
            tr.version_names.setdefault(id(p._version), ("parameter", name))
        for name, b in fn.named_buffers():
            tr.names.setdefault(id(b), ("constant", name))
            tr.version_names.setdefault(id(b._version), ("constant", name))
    else:
        for tid, name in _closure_tensors(fn).items():
            tr.names[tid] = (None, name)
    names = _arg_names(fn, len(inputs))
    args = []
    for name, x in zip(names, inputs):
        if isinstance(x, Tensor):
            t = x
            if record_all and not x.requires_grad and x.dtype.is_floating_point:
                t = _alias(x)
            tr.inputs.append((name, t, x.requires_grad))
            args.append(t)
        else:
            args.append(x)

    def observe(node, node_inputs, out) -> None:
        state = _trace.current_state()
        stack = tuple(state.stack[1:]) if state is not None else ()
        tr.records.append(Record(node, tuple(node_inputs), out, stack))

    base.add_observer(observe)
    try:
        with enable_grad():
            result = fn(*args, **kwargs)
    finally:
        base.remove_observer(observe)
    tr.result = result
    tr.outputs = flatten_outputs(result)
    return tr


# ---- building graphs ----------------------------------------------------------------------
def _saved_of(op) -> list:
    """What a recorded op holds for backward, as SavedTensor entries."""
    out = []
    for e, t in base.held(op):  # nothing once freed by a backward
        if e.source == base.NEW:
            what = e.name
        else:
            what = "output" if e.source == base.OUTPUT else f"input {e.index}"
        out.append(SavedTensor(what, tuple(t.shape), t.dtype, e.kind, base.storage_nbytes(t),
                               id(t._version)))
    return out


def _declared_saved(op, inputs, out, flags) -> list | None:
    """What `op` would save had its inputs required grad as `flags` say (None if unknown).

    Tracing through an alias makes an input require grad that does not in training; the op
    consuming it would then keep more than a training step keeps. The contract's `saved`
    says what it keeps with the true flags, without running anything.
    """
    probe = copy.copy(op)
    proxies = []
    for t, f in zip(inputs, flags):
        p = Tensor._make(None, t.shape, t.dtype, meta)
        p.requires_grad = f
        proxies.append(p)
    try:
        probe.infer(*proxies)
        entries = probe.saved(*proxies, out=Tensor._make(None, out.shape, out.dtype, meta))
    except Exception:  # noqa: BLE001  (a contract that cannot run on proxies: keep what we have)
        return None
    result = []
    for e in entries or ():
        if e.source == base.INPUT:
            t, what, key = inputs[e.index], f"input {e.index}", id(inputs[e.index]._version)
            shape, dtype, size = t.shape, t.dtype, base.storage_nbytes(t)
        elif e.source == base.OUTPUT:
            shape, dtype, what, key = out.shape, out.dtype, "output", id(out._version)
            size = _nbytes(shape, dtype)
        else:
            shape, dtype, what, key = e.shape, e.dtype, e.name, id(e)
            size = _nbytes(shape, dtype)
        result.append(SavedTensor(what, tuple(shape), dtype, e.kind, size, key))
    return result


def _detail(op) -> str:
    c = getattr(op, "c", None)
    if isinstance(c, (int, float)) and not isinstance(c, bool):
        return f"{c:.4g}" if isinstance(c, float) else str(c)
    return ""


def _mark_saved(nodes: list, edges: list) -> None:
    by_dst: dict[str, list] = {}
    by_src: dict[str, list] = {}
    for e in edges:
        by_dst.setdefault(e.dst, []).append(e)
        by_src.setdefault(e.src, []).append(e)
    for n in nodes:
        for s in n.saved:
            if s.what.startswith("input "):
                i = int(s.what.split()[1])
                for e in by_dst.get(n.id, ()):
                    if e.index == i:
                        e.saved = True
            elif s.what == "output":
                for e in by_src.get(n.id, ()):
                    e.saved = True


def from_trace(tr: Trace) -> Graph:
    """The graph of a traced call."""
    nodes: list[Node] = []
    edges: list[Edge] = []
    src_of: dict[int, str] = {}  # id(tensor) -> node id
    grad: dict[int, bool] = {}  # id(tensor) -> a gradient flows to it in training
    leaves: dict[str, Node] = {}
    first_user: dict[str, tuple] = {}
    path_stack: dict[str, tuple] = {}
    for rec in tr.records:
        for i, p in enumerate(rec.stack):
            path_stack.setdefault(p, rec.stack[:i + 1])

    def new(kind, name, t=None, **kw) -> Node:
        n = Node(f"n{len(nodes)}", kind, name, None if t is None else tuple(t.shape),
                 None if t is None else t.dtype, **kw)
        nodes.append(n)
        return n

    for name, t, rg in tr.inputs:
        src_of[id(t)] = new("input", name, t).id
        grad[id(t)] = rg

    def source(t: Tensor) -> str:
        nid = src_of.get(id(t))
        if nid is not None:
            return nid
        kind, name = tr.leaf(t) or (None, None)
        if kind is None:
            kind = "parameter" if t.requires_grad else "constant"
        n = new(kind, name or kind, t)
        if kind == "parameter" and name and "." in name:
            owner = name.rsplit(".", 1)[0]
            n.stack = path_stack.get(owner, ())
        leaves[n.id] = n
        src_of[id(t)] = n.id
        grad[id(t)] = t.requires_grad
        return n.id

    for rec in tr.records:
        op = rec.op
        srcs = [source(t) for t in rec.inputs]
        flags = [grad.get(id(t), t.requires_grad) for t in rec.inputs]
        actual = [t.requires_grad for t in rec.inputs]
        n = new("op", op.name, rec.out, stack=rec.stack, op=op, detail=_detail(op))
        if flags == actual:
            n.saved = _saved_of(op)
        elif not any(flags):
            n.recorded = False  # a training step records no node here: nothing is kept
        else:
            declared = _declared_saved(op, rec.inputs, rec.out, flags)
            n.saved = _saved_of(op) if declared is None else declared
        for i, (s, t) in enumerate(zip(srcs, rec.inputs)):
            edges.append(Edge(s, n.id, tuple(t.shape), t.dtype, i,
                              requires_grad=bool(flags[i]), key=id(t)))
            if s in leaves and s not in first_user:
                first_user[s] = rec.stack
        src_of[id(rec.out)] = n.id
        grad[id(rec.out)] = any(flags)
    for name, t in tr.outputs:
        s = source(t)
        o = new("output", name, t)
        edges.append(Edge(s, o.id, tuple(t.shape), t.dtype, 0,
                          requires_grad=grad.get(id(t), False), key=id(t)))
    for nid, n in leaves.items():  # a leaf with no module of its own sits with its first user
        if not n.stack:
            n.stack = first_user.get(nid, ())
    _mark_saved(nodes, edges)
    counts = {}
    if tr.model is not None:
        params = {id(p._version) for p in tr.model.parameters()}
        for path, m in tr.module_objects.items():
            counts[path] = sum(p.numel() for p in m.parameters())
    else:
        params = {id(t._version) for _, t in _leaf_tensors(tr) if t.requires_grad}
    return Graph(nodes, edges, tr.modules, params, counts)


def _leaf_tensors(tr: Trace):
    for rec in tr.records:
        for t in rec.inputs:
            if t.grad_fn is None and tr.leaf(t) is not None:
                yield tr.leaf(t)[1], t


def from_roots(roots, params=None) -> Graph:
    """The graph recorded behind `roots` (tensors), walking each node's `next` links."""
    from ..nn.parameter import Parameter

    names: dict[int, str] = {}
    if params is not None:
        items = params.named_parameters() if hasattr(params, "named_parameters") else (
            params.items())
        for name, p in items:
            names[id(p)] = name
    ops = []
    seen: set[int] = set()
    stack = [(r.grad_fn, False) for r in reversed(roots) if r.grad_fn is not None]
    while stack:
        op, done = stack.pop()
        if done:
            ops.append(op)
            continue
        if id(op) in seen:
            continue
        seen.add(id(op))
        stack.append((op, True))
        for m in reversed(op.next[0::3]):
            if isinstance(m, base.Op) and id(m) not in seen:
                stack.append((m, False))
    nodes: list[Node] = []
    edges: list[Edge] = []
    ids: dict[int, str] = {}
    param_keys = set()

    def new(kind, name, shape, dtype, **kw) -> Node:
        n = Node(f"n{len(nodes)}", kind, name, None if shape is None else tuple(shape), dtype,
                 **kw)
        nodes.append(n)
        return n

    for op in ops:
        srcs = []
        for m, shape, dtype in base.edges(op):
            if isinstance(m, base.Op):
                srcs.append((ids[id(m)], True))
            elif isinstance(m, Tensor):
                if id(m) not in ids:
                    named = names.get(id(m))
                    kind = "parameter" if named or isinstance(m, Parameter) else "input"
                    ids[id(m)] = new(kind, named or kind, shape, dtype).id
                    if kind == "parameter":
                        param_keys.add(id(m._version))
                srcs.append((ids[id(m)], True))
            else:
                srcs.append((new("constant", "constant", shape, dtype).id, False))
        n = new("op", op.name, None, None, op=op, detail=_detail(op))
        n.saved = _saved_of(op)
        ids[id(op)] = n.id
        for i, ((s, rg), (_, shape, dtype)) in enumerate(zip(srcs, base.edges(op))):
            edges.append(Edge(s, n.id, tuple(shape), dtype, i, requires_grad=rg, key=s))
    for i, r in enumerate(roots):
        name = "output" if len(roots) == 1 else f"output{i}"
        o = new("output", name, r.shape, r.dtype)
        if r.grad_fn is not None:
            s = ids[id(r.grad_fn)]
            src = next(n for n in nodes if n.id == s)
            src.shape, src.dtype = tuple(r.shape), r.dtype
        elif id(r) in ids:
            s = ids[id(r)]
        else:
            s = new("input" if r.requires_grad else "constant", "input" if r.requires_grad
                    else "constant", r.shape, r.dtype).id
        edges.append(Edge(s, o.id, tuple(r.shape), r.dtype, 0, requires_grad=r.requires_grad,
                          key=s))
    for n in nodes:  # an op's output shape: what it sends along its out-edges
        if n.kind == "op" and n.shape is None:
            e = next((e for e in edges if e.src == n.id), None)
            if e is not None:
                n.shape, n.dtype = e.shape, e.dtype
    _mark_saved(nodes, edges)
    return Graph(nodes, edges, {}, param_keys)


def _flatten_roots(args) -> list:
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, (tuple, list)):
            out += _flatten_roots(a)
        elif a is not None:
            raise TypeError(f"graph(): expected tensors (or a model and its inputs), got "
                            f"{type(a).__name__}")
    return out


def graph(*args, depth: int | None = None, backward: bool = False, params=None,
          **kwargs) -> Graph:
    """The computation graph: `graph(loss)` of a recorded graph, `graph(model, *inputs)` traced.

    `depth=k` collapses each module called at depth k into one node (1: the model's
    children); `backward=True` adds the gradient flow; `params` (a Module or a dict of
    name -> tensor) names the leaves of a recorded graph. Keyword arguments other than
    these go to the model's forward.
    """
    if not args:
        raise TypeError("graph() needs root tensors, or a model (or function) and its inputs")
    first = args[0]
    if isinstance(first, (Tensor, tuple, list)):
        g = from_roots(_flatten_roots(args), params)
    elif callable(first):
        g = from_trace(trace_call(first, *args[1:], **kwargs))
    else:
        raise TypeError(f"graph(): expected tensors or a model, got {type(first).__name__}")
    if depth is not None:
        g = g.collapse(depth)
    if backward:
        g = g.with_backward()
    return g
