"""Module boundaries: the current module path and the shape chain of the running call.

`Module.__call__` goes through `call_module`. The outermost call opens a `CallState`;
every nested module call pushes its path, and when it returns its output shape joins the
chain (replacing its children's entries, so the chain stays one line per finished step).
An error raised inside gets the path, the module's kind, the chain and a hint. nn imports
this file, so it sits in nn's layer, not inspect's: it imports only errors, shape, breaks.
"""

from __future__ import annotations

import inspect as _inspect
import threading
import weakref

from ..autograd import breaks
from ..errors import ShapeflowError
from ..shape import format_shape


class _Calls(threading.local):
    """This thread's running call and its last finished one: each thread runs its own model,
    so an error names its own module path (__init__ runs once per thread)."""

    def __init__(self) -> None:
        self.current: CallState | None = None
        self.last_chain: list | None = None  # the chain of the last finished top-level call
        self.last_called: set[str] = set()  # paths of the modules the last top-level call ran
        self.last_root = None  # weakref to the last top-level call's module (explain_no_grad)
        # module -> breaks.count() when its last top-level call began (explain_no_grad reads
        # the breaks from there on, the user's code between calls included)
        self.starts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_calls = _Calls()


def __getattr__(name: str):
    """`trace.last_chain`, `last_called`, `last_root`, `starts`: this thread's."""
    if name in ("last_chain", "last_called", "last_root", "starts"):
        return getattr(_calls, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Row:
    """One module call: where, what kind, shapes in and out, parameters, saved bytes."""

    __slots__ = ("path", "kind", "depth", "input_shapes", "output_shape", "params",
                 "param_bytes", "saved_bytes", "saved_by_kind", "module")

    def __init__(self, path, module, depth, input_shapes) -> None:
        self.path, self.module, self.depth = path, module, depth
        self.kind = type(module).__name__
        self.input_shapes = input_shapes
        self.output_shape = None
        self.params = self.param_bytes = 0
        self.saved_bytes = 0
        self.saved_by_kind: dict[str, object] = {}

    def __repr__(self) -> str:
        return (f"Row({self.path or '<root>'}: {self.kind} "
                f"{[format_shape(s) for s in self.input_shapes]} -> "
                f"{format_shape(self.output_shape) if self.output_shape is not None else None})")


class CallState:
    """The running top-level call: module stack, chain so far, and (optionally) rows."""

    def __init__(self, root, args, collect_rows: bool = False) -> None:
        self.root = root
        self.rebuilt = False  # whether this call rebuilt the root's path map already
        self.stack: list[str] = []
        self.modules: list = []  # the modules whose paths are on `stack`
        self.chain: list[tuple[str, object]] = [(input_name(root), first_shape(args))]
        self.called: set[str] = set()
        self.rows: list[Row] | None = [] if collect_rows else None
        self.open_rows: list[Row] = []

    def path_of(self, module) -> str:
        if not self.modules:
            return ""
        name = child_name(self.modules[-1], module)
        if name is not None:  # the common case: a module calls one of its children
            parent = self.stack[-1]
            return parent + "." + name if parent else name
        # a deeper module called directly (a ModuleList's blocks), or an unregistered one
        path = self.deep_path(module)
        if path is None:  # a module called that is not a registered submodule
            parent = self.stack[-1] if self.stack else ""
            path = (parent + "." if parent else "") + type(module).__name__.lower()
        return path

    def deep_path(self, module) -> str | None:
        """The path of a registered submodule from the root's map (cached, each hit checked)."""
        d = self.root.__dict__
        paths = d.get("_module_paths")
        path = None if paths is None else paths.get(id(module))
        if path is not None and resolves(self.root, path, module):
            return path
        if self.rebuilt:
            return None
        self.rebuilt = True
        paths = {}
        for p, m in self.root.named_modules():
            paths.setdefault(id(m), p)
        d["_module_paths"] = paths
        return paths.get(id(module))

    def finish(self, path: str, out) -> None:
        prefix = path + "." if path else ""
        chain = self.chain
        while len(chain) > 1 and (chain[-1][0].startswith(prefix) and chain[-1][0] != path):
            chain.pop()
        if path:
            chain.append((path, first_shape((out,))))


def child_name(parent, module) -> str | None:
    """The name under which `parent` registered `module`, or None.

    Cached on the parent as id -> name; every hit is checked against `_modules`, so a
    replaced, moved or copied child never gets a stale name.
    """
    d = parent.__dict__
    names = d.get("_child_names")
    if names is not None:
        name = names.get(id(module))
        if name is not None and d["_modules"].get(name) is module:
            return name
    modules = d.get("_modules")
    if not modules:
        return None
    names = {}
    for n, m in modules.items():
        if m is not None:
            names.setdefault(id(m), n)
    d["_child_names"] = names
    name = names.get(id(module))
    return name


def resolves(root, path: str, module) -> bool:
    """Whether `path` (a.b.c) leads from root to this very module through `_modules`."""
    m = root
    for name in path.split("."):
        m = m.__dict__.get("_modules", {}).get(name)
        if m is None:
            return False
    return m is module


_input_names: dict[type, str] = {}


def input_name(module) -> str:
    """The name of forward's first argument (`image`, `idx`, `x`), cached per class."""
    cls = type(module)
    name = _input_names.get(cls)
    if name is None:
        try:
            params = list(_inspect.signature(cls.forward).parameters)
            name = params[1] if len(params) > 1 else "input"
        except (TypeError, ValueError):
            name = "input"
        _input_names[cls] = name
    return name


def first_shape(values):
    for v in values:
        if hasattr(v, "shape") and hasattr(v, "dtype"):
            return tuple(v.shape)
        if isinstance(v, (tuple, list)):
            s = first_shape(v)
            if s is not None:
                return s
    return None


def _compact(shape) -> str:
    return "?" if shape is None else "[" + ",".join(str(s).replace(" ", "") for s in shape) + "]"


def format_chain(chain, failing: str | None = None, limit: int = 8) -> str:
    """`image [B,1,8,8] -> patchify [B,16,4] -> ...  x blocks.1.mlp.fc2`."""
    items = [f"{name} {_compact(shape)}" for name, shape in chain]
    if len(items) > limit:
        items = items[:1] + ["..."] + items[-(limit - 2):]
    text = " -> ".join(items)
    return text + (f"  x {failing}" if failing else "")


def module_kind(module) -> str:
    """`Linear 256->64`, `LayerNorm`, ...: how an error names the module."""
    name = type(module).__name__
    if hasattr(module, "in_features") and hasattr(module, "out_features"):
        return f"{name} {module.in_features}->{module.out_features}"
    return name


def call_module(module, impl, args, kwargs, collect_rows: bool = False):
    """Run impl(*args, **kwargs) as the call of `module`, recording path and chain."""
    calls = _calls
    state = calls.current
    top = state is None
    if top:
        state = calls.current = CallState(module, args, collect_rows)
        calls.starts[module] = breaks.count()
        calls.last_root = weakref.ref(module)
    path = state.path_of(module)
    state.stack.append(path)
    state.modules.append(module)
    state.called.add(path)
    row = None
    if state.rows is not None:
        row = Row(path, module, len(state.stack) - 1,
                  [tuple(a.shape) for a in args if hasattr(a, "shape")])
        state.rows.append(row)
        state.open_rows.append(row)
    try:
        out = impl(*args, **kwargs)
        state.finish(path, out)
        if row is not None:
            row.output_shape = first_shape((out,))
            state.open_rows.pop()
        return out
    except ShapeflowError as err:
        annotate(err, module, path, state)
        raise
    finally:
        state.stack.pop()
        state.modules.pop()
        if top:
            calls.current = None
            calls.last_chain = state.chain
            calls.last_called = state.called


def annotate(err: ShapeflowError, module, path: str, state: CallState) -> None:
    """Give an error raised inside `module` its place: path, kind, chain tail, hint."""
    if err.module_path is not None:
        return  # an inner module already said where
    err.module_path = path or type(module).__name__
    err.module_kind = module_kind(module)
    err.chain = format_chain(state.chain, failing=path or None)
    hint = module_hint(module, path, err, state)
    if hint:
        err.hint = hint if not err.hint else f"{hint}; {err.hint}"


def module_hint(module, path: str, err: ShapeflowError, state: CallState) -> str | None:
    """Hints only a module boundary can give (which layer produced the size that misfits)."""
    in_features = getattr(module, "in_features", None)
    if in_features is None or err.op not in ("linear", "matmul"):
        return None
    # the tensor that reached this module came from the last finished step of the chain
    from ..shape import dims_equal

    prev_name, prev_shape = state.chain[-1]
    if prev_shape and dims_equal(prev_shape[-1], in_features) is False:
        prev = prev_name.rsplit(".", 1)[-1]
        here = path.rsplit(".", 1)[-1] if path else type(module).__name__
        return f"{prev} produces {prev_shape[-1]} but {here} was built for {in_features}"
    return None


def current_path() -> str | None:
    """The path of the module running now (None outside any module call)."""
    state = _calls.current
    return state.stack[-1] if state is not None and state.stack else None


def current_state() -> CallState | None:
    return _calls.current


breaks.current_path = current_path
