"""ONNX export of a model's inference graph: `sf.onnx.export(model, example_inputs, path)`.

The model runs twice without computing anything big: once on the meta device with the
dynamic dims as symbols (`B`, `L`), which gives every op, its attributes and the sizes as
expressions in those symbols; and, only when the call makes constants of its own (the
positions of a GPT), once on cpu for their values. Each recorded op maps to standard ONNX
operators; sizes that depend on a symbol are computed in the graph from the input's
`Shape`, so the file runs at any batch size (and sequence length), and the symbols are the
inputs' and outputs' `dim_param`s. onnx and onnxruntime are optional (`shapeflow[onnx]`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from fractions import Fraction

import numpy as np

from .. import dtypes as _dt
from ..device import cpu, meta
from ..errors import ExportError, ShapeflowError
from ..inspect.graph import meta_copy, trace_call
from ..shape import dims_equal
from ..symbolic import Dim
from ..tensor import Tensor

__all__ = ["export", "ExportError"]

MIN_OPSET = 13

# (claims(model), export(model, ...)) pairs installed by the parts above io that export some
# models their own way: sf.quant writes its quantized modules as QDQ pairs (quant.onnx_qdq)
MODEL_EXPORTERS: list = []


def _need_onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - the test extra installs it
        raise ExportError("ONNX export needs the onnx package", op="onnx.export",
                          hint="pip install 'shapeflow[onnx]'") from None
    return onnx


def export(model, example_inputs, path, input_names=None, output_names=None,
           dynamic_dims=("B", "L"), opset: int = 17, check: bool = True):
    """Write an ONNX model of `model`'s inference graph (eval mode, no cache) to `path`.

    `example_inputs`: a tensor or a tuple of tensors (cpu, or meta with symbolic dims).
    `dynamic_dims`: names given to the leading axes of each cpu input, in order (`B` for
    axis 0, `L` for axis 1); an axis the model cannot take as symbolic (the channels of an
    image, the features of an MLP) stays fixed. A dict `{input name or index: {axis: name}}`
    says exactly which, and symbolic meta inputs bring their own. Only tensor outputs are
    exported (a GPT's `(logits, None)` gives `logits`). Returns the `onnx.ModelProto`.
    A quantized model (`sf.quant.quantize`) is written as QDQ pairs at opset 21 or newer
    (see shapeflow.quant.onnx_qdq).
    """
    onnx = _need_onnx()
    if not hasattr(model, "named_parameters"):
        raise ExportError(f"export: expected a shapeflow nn.Module, got {type(model).__name__}",
                          op="onnx.export")
    for claims, export_model in MODEL_EXPORTERS:  # sf.quant's models: QDQ pairs
        if claims(model):
            return export_model(model, example_inputs, path, input_names, output_names,
                                dynamic_dims, opset, check)
    if opset < MIN_OPSET:
        raise ExportError(f"ONNX export supports opset {MIN_OPSET} and newer, got {opset}",
                          op="onnx.export")
    inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (
        example_inputs,)
    if not inputs or not all(isinstance(x, Tensor) for x in inputs):
        raise ExportError("export: example_inputs must be a tensor or a tuple of tensors",
                          op="onnx.export")
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        meta_tr, concrete = _meta_trace(model, inputs, dynamic_dims)
        proto = _build(onnx, model, meta_tr, concrete, input_names, output_names, opset)
    finally:
        for m, mode in modes:
            m.training = mode
    if check:
        onnx.checker.check_model(proto)
    if path is not None:
        onnx.save(proto, str(path))
    return proto


# ---- tracing ------------------------------------------------------------------------------
def _axes_plan(inputs, dynamic_dims, names) -> list:
    """[(input index, axis, symbol name)] candidates for dynamic axes, in priority order."""
    # `is meta` in this section means meta itself: export traces a meta copy of the model,
    # and meta inputs are the ones that carry symbolic dims
    if any(x.device is meta for x in inputs):
        return [(i, a, None) for i, x in enumerate(inputs)
                for a, s in enumerate(x.shape) if isinstance(s, Dim)]
    if not dynamic_dims:
        return []
    if isinstance(dynamic_dims, dict):
        plan = []
        for key, axes in dynamic_dims.items():
            i = names.index(key) if isinstance(key, str) else int(key)
            plan += [(i, int(a) % inputs[i].ndim, str(n)) for a, n in axes.items()]
        return plan
    plan = []
    for i, x in enumerate(inputs):
        plan += [(i, a, str(n)) for a, n in enumerate(tuple(dynamic_dims)[:x.ndim])]
    return plan


def _symbolic_inputs(inputs, plan) -> list:
    out = []
    for i, x in enumerate(inputs):
        shape = list(x.shape)
        for j, a, name in plan:
            if j == i and name is not None:
                shape[a] = Dim(name)
        out.append(Tensor._make(None, tuple(shape), x.dtype, meta))
    return out


def _concrete_inputs(inputs) -> tuple:
    """cpu stand-ins for symbolic meta inputs (each symbol at a small size)."""
    out = []
    for x in inputs:
        if x.device is not meta:
            out.append(x)
            continue
        env = {}
        for s in x.shape:
            if isinstance(s, Dim):
                for n, k in s.facts.items():
                    env.setdefault(n, 2 * k)
        shape = tuple(s.evaluate(env) if isinstance(s, Dim) else s for s in x.shape)
        out.append(Tensor._make(np.zeros(shape, x.dtype.np), shape, x.dtype, cpu))
    return tuple(out)


@contextmanager
def _grad_on(model):
    """Float parameters require grad while tracing (so every op is recorded), then as before."""
    params = [p for p in model.parameters() if p.dtype.is_floating_point and not p.requires_grad]
    for p in params:
        p.requires_grad = True
    try:
        yield
    finally:
        for p in params:
            p.requires_grad = False


def _meta_trace(model, inputs, dynamic_dims):
    """Trace on a meta copy with as many of the planned dims symbolic as the model takes."""
    names = _input_names(model, len(inputs))
    plan = _axes_plan(inputs, dynamic_dims, names)
    explicit = isinstance(dynamic_dims, dict) or any(x.device is meta for x in inputs)
    copy = meta_copy(model)
    concrete = _concrete_inputs(inputs)
    while True:
        if any(x.device is meta for x in inputs):  # symbolic inputs bring their own dims
            sym = [Tensor._make(None, x.shape, x.dtype, meta) for x in inputs]
        else:
            sym = _symbolic_inputs(concrete, plan)
        try:
            with _grad_on(copy):
                tr = trace_call(copy, *sym)
            break
        except ShapeflowError:
            if explicit or not plan:
                raise
            plan.pop()  # that axis cannot be symbolic for this model: keep its example size
    return tr, concrete


def _input_names(model, n):
    from ..inspect.graph import _arg_names

    return _arg_names(model, n)


# ---- building the graph -------------------------------------------------------------------
_ONNX_TYPES = {
    "float32": 1, "uint8": 2, "int8": 3, "int16": 5, "int32": 6, "int64": 7, "bool": 9,
    "float16": 10, "float64": 11, "bfloat16": 16,
}


def onnx_type(dtype) -> int:
    return _ONNX_TYPES[dtype.name]


class Builder:
    """Collects ONNX nodes and initializers; computes symbolic sizes from input shapes."""

    def __init__(self, onnx, opset: int) -> None:
        self.onnx, self.h, self.opset = onnx, onnx.helper, opset
        self.nodes: list = []
        self.initializers: list = []
        self.symbols: dict[str, tuple] = {}  # name -> (value name, axis)
        self._dims: dict = {}
        self._consts: dict = {}
        self._n = 0

    def fresh(self, hint: str = "t") -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def add(self, op_type: str, inputs, outputs: int | list = 1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(outputs)] if isinstance(
            outputs, int) else list(outputs)
        self.nodes.append(self.h.make_node(op_type, list(inputs), outs,
                                           name=self.fresh("node"), **attrs))
        return outs[0] if len(outs) == 1 else outs

    def tensor(self, name: str, arr: np.ndarray, dtype=None):
        dtype = dtype or _dt.from_numpy_dtype(arr.dtype)
        if dtype is _dt.bfloat16:
            t = self.h.make_tensor(name, 16, arr.shape, arr.view(np.uint16).tobytes(), raw=True)
        else:
            from onnx import numpy_helper

            t = numpy_helper.from_array(arr if arr.flags.c_contiguous else arr.copy(), name)
        self.initializers.append(t)
        return name

    def const(self, value, dtype=None) -> str:
        """An initializer holding `value` (cached: equal small constants share one)."""
        np_dtype = dtype.np if dtype is not None else None
        arr = np.asarray(value, dtype=np_dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if arr.size <= 16 and key in self._consts:
            return self._consts[key]
        name = self.tensor(self.fresh("const"), arr, dtype)
        if arr.size <= 16:
            self._consts[key] = name
        return name

    def cast(self, name: str, src, dst) -> str:
        return name if src is dst else self.add("Cast", [name], to=onnx_type(dst))

    # sizes ----------------------------------------------------------------------------
    def dim(self, size) -> str:
        """A 1-D int64 tensor [size], computed from the inputs' shapes when symbolic."""
        if type(size) is int:
            return self.const([size], _dt.int64)
        if not isinstance(size, Dim):
            return self.const([int(size)], _dt.int64)
        hit = self._dims.get(size)
        if hit is None:
            hit = self._dims[size] = self._expr(size)
        return hit

    def scalar(self, size) -> str:
        """A 0-d int64 size."""
        if type(size) is int:
            return self.const(size, _dt.int64)
        return self.add("Squeeze", [self.dim(size), self.const([0], _dt.int64)])

    def shape(self, sizes) -> str:
        """A 1-D int64 shape tensor for `sizes` (ints and symbolic dims)."""
        sizes = tuple(sizes)
        if all(type(s) is int for s in sizes):
            return self.const(list(sizes) if sizes else np.zeros(0, np.int64), _dt.int64)
        parts, run = [], []
        for s in sizes:
            if type(s) is int:
                run.append(s)
                continue
            if run:
                parts.append(self.const(run, _dt.int64))
                run = []
            parts.append(self.dim(s))
        if run:
            parts.append(self.const(run, _dt.int64))
        return parts[0] if len(parts) == 1 else self.add("Concat", parts, axis=0)

    def _symbol(self, name: str) -> str:
        if name not in self.symbols:
            raise ExportError(f"the size {name} comes from no input of the model", op="onnx")
        value, axis = self.symbols[name]
        key = ("symbol", name)
        if key not in self._dims:
            shape = self.add("Shape", [value])
            self._dims[key] = self.add("Gather", [shape, self.const([axis], _dt.int64)], axis=0)
        return self._dims[key]

    def _expr(self, d: Dim) -> str:
        # a polynomial over atoms (symbols, x // k, x % k) with integer or rational coefficients
        terms = d._terms
        den = 1
        for _, c in terms:
            if type(c) is Fraction:
                den = den * c.denominator // math.gcd(den, c.denominator)
        acc = None
        for mono, c in terms:
            c = int(c * den)
            t = None
            for atom in mono:
                a = self._symbol(atom) if type(atom) is str else self._atom(atom)
                t = a if t is None else self.add("Mul", [t, a])
            if t is None:
                t = self.const([c], _dt.int64)
            elif c != 1:
                t = self.add("Mul", [t, self.const([c], _dt.int64)])
            acc = t if acc is None else self.add("Add", [acc, t])
        if den != 1:
            acc = self.add("Div", [acc, self.const([den], _dt.int64)])
        return acc

    def _atom(self, atom) -> str:
        arg = self.dim(atom.arg)
        k = self.const([atom.k], _dt.int64)
        return self.add("Div" if atom.op == "//" else "Mod", [arg, k])

    # reductions take axes as an attribute before opset 18 (ReduceSum: before 13)
    def reduce(self, op_type: str, x: str, axes, keepdims: bool) -> str:
        axes = [int(a) for a in axes]
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.add(op_type, [x, self.const(axes, _dt.int64)], keepdims=int(keepdims))
        return self.add(op_type, [x], axes=axes, keepdims=int(keepdims))


def _build(onnx, model, tr, concrete, input_names, output_names, opset):
    h = onnx.helper
    b = Builder(onnx, opset)
    names: dict[int, str] = {}  # id(tensor in the trace) -> ONNX value name
    in_names = list(input_names) if input_names is not None else [n for n, _, _ in tr.inputs]
    if len(in_names) != len(tr.inputs):
        raise ExportError(f"export: {len(in_names)} input names for {len(tr.inputs)} inputs",
                          op="onnx.export")
    graph_inputs = []
    for name, (_, t, _) in zip(in_names, tr.inputs):
        names[id(t)] = name
        graph_inputs.append(h.make_tensor_value_info(name, onnx_type(t.dtype), _dims(t.shape)))
        for axis, s in enumerate(t.shape):
            if isinstance(s, Dim) and s.name is not None:
                b.symbols.setdefault(s.name, (name, axis))
    originals = dict(model.named_parameters())
    originals.update(dict(model.named_buffers()))
    produced = {id(r.out) for r in tr.records}
    values = _constant_values(model, tr, concrete, names, produced)

    def value(t: Tensor, where: tuple) -> str:
        nid = names.get(id(t))
        if nid is not None:
            return nid
        leaf = tr.leaf(t)
        if leaf is not None:
            _, pname = leaf
            src = originals.get(pname)
            if src is None or src._data is None:
                raise ExportError(f"export: {pname} has no data (a meta model?)",
                                  op="onnx.export", hint="export a model on cpu")
            arr = src.device.to_numpy(src._data)  # the host's copy of the weights
            if tuple(arr.shape) != tuple(t.shape):  # a view of a parameter
                raise ExportError(f"export: a view of {pname} that no recorded op made",
                                  op="onnx.export")
            names[id(t)] = b.tensor(pname, arr, src.dtype)
            return names[id(t)]
        names[id(t)] = _constant(b, t, values.get(where), where, tr)
        return names[id(t)]

    for k, rec in enumerate(tr.records):
        ins = [value(t, (k, i)) for i, t in enumerate(rec.inputs)]
        emit = emitter(rec.op)
        if emit is None:
            path = rec.stack[-1] if rec.stack else None
            raise ExportError(
                f"ONNX export: the op {rec.op.name!r} ({type(rec.op).__name__}) has no ONNX "
                f"mapping", op=rec.op.name, module_path=path,
                hint="compute it with ops that have an ONNX mapping (see shapeflow.io.onnx)")
        try:
            names[id(rec.out)] = emit(b, rec.op, ins, rec.inputs, rec.out)
        except ExportError as err:
            if err.module_path is None and rec.stack:
                err.module_path = rec.stack[-1]
            raise
    outs = tr.outputs
    out_names = list(output_names) if output_names is not None else [n for n, _ in outs]
    if len(out_names) != len(outs):
        raise ExportError(f"export: {len(out_names)} output names for the {len(outs)} tensor "
                          f"output(s) of the model", op="onnx.export")
    graph_outputs = []
    for name, (_, t) in zip(out_names, outs):
        src = value(t, ("out", name))
        b.nodes.append(h.make_node("Identity", [src], [name], name=b.fresh("node")))
        graph_outputs.append(h.make_tensor_value_info(name, onnx_type(t.dtype), _dims(t.shape)))
    g = h.make_graph(b.nodes, type(model).__name__, graph_inputs, graph_outputs,
                     initializer=b.initializers)
    opsets = [h.make_opsetid("", opset)]
    proto = h.make_model(g, opset_imports=opsets, producer_name="shapeflow",
                         ir_version=h.find_min_ir_version_for(opsets))
    return proto


def _dims(shape) -> list:
    return [str(s) if isinstance(s, Dim) else int(s) for s in shape]


def _constant_values(model, tr, concrete, names, produced) -> dict:
    """Values of the tensors a call makes itself (not inputs, parameters or op outputs)."""
    wanted = []
    for k, rec in enumerate(tr.records):
        for i, t in enumerate(rec.inputs):
            if id(t) not in names and id(t) not in produced and tr.leaf(t) is None:
                wanted.append((k, i))
    if not wanted:
        return {}
    with _grad_on(model):
        cpu_tr = trace_call(model, *concrete)
    if [type(r.op) for r in cpu_tr.records] != [type(r.op) for r in tr.records]:
        raise ExportError("export: the model runs different ops on meta and on cpu inputs, so "
                          "its graph depends on data", op="onnx.export")
    out = {}
    for k, i in wanted:
        t = cpu_tr.records[k].inputs[i]
        out[(k, i)] = (t, None if t._data is None else t.device.to_numpy(t._data))
    return out


def _constant(b: Builder, t: Tensor, found, where, tr) -> str:
    """A tensor the call made itself: an initializer, or an arange over a symbolic size."""
    k, i = where
    rec = tr.records[k]
    if t._origin in ("int", "no_grad", "detach", "data"):
        raise ExportError(
            f"ONNX export: input {i} of {rec.op.name} was computed from the model's inputs "
            f"outside the recorded graph ({t._origin}); export follows recorded ops only",
            op=rec.op.name, module_path=rec.stack[-1] if rec.stack else None,
            hint="avoid no_grad(), detach() and integer/comparison ops inside forward")
    if found is None or found[1] is None:
        raise ExportError(f"ONNX export: no value for input {i} of {rec.op.name}",
                          op=rec.op.name)
    arr = found[1]
    if all(type(s) is int for s in t.shape):
        return b.tensor(b.fresh("const"), arr.reshape(tuple(t.shape)), t.dtype)
    # a constant whose size follows a symbol: only arange(start, start + n) is understood
    n = t.shape[0] if t.ndim == 1 else None
    if n is not None and arr.ndim == 1 and arr.dtype.kind in "iu" and arr.size and np.array_equal(
            arr, np.arange(arr[0], arr[0] + arr.size)):
        start = int(arr[0])
        r = b.add("Range", [b.const(start, _dt.int64), b.scalar(start + n),
                            b.const(1, _dt.int64)])
        return b.cast(r, _dt.int64, t.dtype)
    raise ExportError(
        f"ONNX export: input {i} of {rec.op.name} is a constant of symbolic shape "
        f"{list(t.shape)} made inside forward; its values cannot follow the size",
        op=rec.op.name, module_path=rec.stack[-1] if rec.stack else None,
        hint="make it from an op on the input, or export with fixed sizes (dynamic_dims=())")


# ---- op -> ONNX ---------------------------------------------------------------------------
# Each emitter(b, op, ins, tensors, out) adds the nodes computing `out` and returns its name:
# `ins` are the ONNX names of the op's inputs, `tensors` the traced inputs (shapes, dtypes).
def _unary(onnx_op: str):
    def emit(b, op, ins, ts, out):
        return b.add(onnx_op, [b.cast(ins[0], ts[0].dtype, out.dtype)])

    return emit


def _binary(onnx_op: str):
    def emit(b, op, ins, ts, out):
        dt = op.compute
        return b.add(onnx_op, [b.cast(ins[0], ts[0].dtype, dt), b.cast(ins[1], ts[1].dtype, dt)])

    return emit


def _scalar(onnx_op: str, reverse: bool = False):
    def emit(b, op, ins, ts, out):
        x = b.cast(ins[0], ts[0].dtype, op.dt)
        c = b.const(op.c, op.dt)
        return b.add(onnx_op, [c, x] if reverse else [x, c])

    return emit


def _rsqrt(b, op, ins, ts, out):
    return b.add("Reciprocal", [b.add("Sqrt", [b.cast(ins[0], ts[0].dtype, out.dtype)])])


def _log1p(b, op, ins, ts, out):
    x = b.cast(ins[0], ts[0].dtype, out.dtype)
    return b.add("Log", [b.add("Add", [x, b.const(1.0, out.dtype)])])


def _expm1(b, op, ins, ts, out):
    x = b.cast(ins[0], ts[0].dtype, out.dtype)
    return b.add("Sub", [b.add("Exp", [x]), b.const(1.0, out.dtype)])


def _silu(b, op, ins, ts, out):
    x = b.cast(ins[0], ts[0].dtype, out.dtype)
    return b.add("Mul", [x, b.add("Sigmoid", [x])])


def _softplus(b, op, ins, ts, out):
    x = b.cast(ins[0], ts[0].dtype, out.dtype)
    if op.beta == 1:
        return b.add("Softplus", [x])
    bx = b.add("Mul", [x, b.const(op.beta, out.dtype)])
    return b.add("Div", [b.add("Softplus", [bx]), b.const(op.beta, out.dtype)])


def _gelu(b, op, ins, ts, out):
    dt = out.dtype
    x = b.cast(ins[0], ts[0].dtype, dt)
    if op.approximate == "tanh":
        x3 = b.add("Mul", [b.add("Mul", [x, x]), x])
        inner = b.add("Add", [x, b.add("Mul", [x3, b.const(0.044715, dt)])])
        t = b.add("Tanh", [b.add("Mul", [inner, b.const(math.sqrt(2.0 / math.pi), dt)])])
    else:
        t = b.add("Erf", [b.add("Mul", [x, b.const(1.0 / math.sqrt(2.0), dt)])])
    half_x = b.add("Mul", [x, b.const(0.5, dt)])
    return b.add("Mul", [half_x, b.add("Add", [t, b.const(1.0, dt)])])


def _leaky_relu(b, op, ins, ts, out):
    return b.add("LeakyRelu", [ins[0]], alpha=float(op.slope))


def _elu(b, op, ins, ts, out):
    return b.add("Elu", [ins[0]], alpha=float(op.alpha))


def _clamp(b, op, ins, ts, out):
    x = b.cast(ins[0], ts[0].dtype, out.dtype)
    lo = "" if op.lo is None else b.const(op.lo, out.dtype)
    hi = "" if op.hi is None else b.const(op.hi, out.dtype)
    return b.add("Clip", [x, lo, hi])


def _cast(b, op, ins, ts, out):
    return b.add("Cast", [ins[0]], to=onnx_type(op.dtype))


def _where(b, op, ins, ts, out):
    dt = op.compute
    a, c = b.cast(ins[1], ts[1].dtype, dt), b.cast(ins[2], ts[2].dtype, dt)
    return b.add("Where", [ins[0], a, c])


def _identity(b, op, ins, ts, out):
    return b.add("Identity", [ins[0]])


def _matmul(b, op, ins, ts, out):
    return b.add("MatMul", ins)


def _einsum(b, op, ins, ts, out):
    return b.add("Einsum", ins, equation=op.equation.replace(" ", ""))


def _reshape(b, op, ins, ts, out):
    return b.add("Reshape", [ins[0], b.shape(out.shape)])


def _expand(b, op, ins, ts, out):
    return b.add("Expand", [ins[0], b.shape(out.shape)])


def _permute(b, op, ins, ts, out):
    return b.add("Transpose", [ins[0]], perm=[int(d) for d in op.dims])


def _swap_last(b, name: str, ndim: int) -> str:
    perm = list(range(ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return b.add("Transpose", [name], perm=perm)


def _linear(b, op, ins, ts, out):
    y = b.add("MatMul", [ins[0], b.add("Transpose", [ins[1]], perm=[1, 0])])
    return b.add("Add", [y, ins[2]]) if op.has_bias else y


def _softmax(onnx_op: str):
    def emit(b, op, ins, ts, out):
        return b.add(onnx_op, [ins[0]], axis=int(op.axis) if ts[0].ndim else 0)

    return emit


def _norm_parts(op, ins):
    w = ins[1] if op.has_w else None
    bias = ins[1 + op.has_w] if op.has_b else None
    return w, bias


def _layer_norm(b, op, ins, ts, out):
    x, dt, k = ins[0], out.dtype, len(op.ns)
    w, bias = _norm_parts(op, ins)
    if b.opset >= 17:
        scale = w if w is not None else b.const(np.ones(tuple(op.ns), dt.np), dt)
        return b.add("LayerNormalization", [x, scale] + ([bias] if bias is not None else []),
                     axis=-k, epsilon=float(op.eps))
    axes = list(range(-k, 0))
    xc = b.add("Sub", [x, b.reduce("ReduceMean", x, axes, True)])
    return _normalize(b, op, xc, axes, w, bias, dt)


def _rms_norm(b, op, ins, ts, out):
    w, bias = _norm_parts(op, ins)
    return _normalize(b, op, ins[0], list(range(-len(op.ns), 0)), w, bias, out.dtype)


def _normalize(b, op, xc, axes, w, bias, dt):
    var = b.reduce("ReduceMean", b.add("Mul", [xc, xc]), axes, True)
    rstd = b.add("Reciprocal", [b.add("Sqrt", [b.add("Add", [var, b.const(op.eps, dt)])])])
    y = b.add("Mul", [xc, rstd])
    if w is not None:
        y = b.add("Mul", [y, w])
    if bias is not None:
        y = b.add("Add", [y, bias])
    return y


def _embedding(b, op, ins, ts, out):
    return b.add("Gather", [ins[1], ins[0]], axis=0)


def _attention(b, op, ins, ts, out):
    q, k, v = ins[:3]
    tq, tk = ts[0], ts[1]
    dt = out.dtype
    scale = op.scale if op.scale is not None else 1.0 / math.sqrt(int(tq.shape[-1]))
    s = b.add("MatMul", [q, _swap_last(b, k, tk.ndim)])
    s = b.add("Mul", [s, b.const(scale, dt)])
    if op.is_causal:
        L, S = tq.shape[-2], tk.shape[-2]
        if type(L) is int and type(S) is int:
            keep = b.const(np.tril(np.ones((L, S), bool)))
        else:  # key j is visible from query i when j <= i
            rows = b.add("Range", [b.const(0, _dt.int64), b.scalar(L), b.const(1, _dt.int64)])
            cols = b.add("Range", [b.const(0, _dt.int64), b.scalar(S), b.const(1, _dt.int64)])
            rows = b.add("Unsqueeze", [rows, b.const([1], _dt.int64)])
            cols = b.add("Unsqueeze", [cols, b.const([0], _dt.int64)])
            keep = b.add("LessOrEqual", [cols, rows])
        s = b.add("Where", [keep, s, b.const(-np.inf, dt)])
    elif len(ins) > 3:
        mask = ins[3]
        s = b.add("Where", [mask, s, b.const(-np.inf, dt)]) if ts[3].dtype is _dt.bool_ else (
            b.add("Add", [s, mask]))
    p = b.add("Softmax", [s], axis=-1)
    return b.add("MatMul", [p, v])


def _reduction(onnx_op: str):
    def emit(b, op, ins, ts, out):
        if not op.dims:
            return b.add("Identity", [ins[0]])
        x = ins[0]
        if onnx_op != "ReduceMax":
            x = b.cast(x, ts[0].dtype, out.dtype)
        return b.reduce(onnx_op, x, op.dims, op.keepdim)

    return emit


def _amax(b, op, ins, ts, out):
    kind = "ReduceMax" if op.name in ("amax", "max") else "ReduceMin"
    if not op.dims:
        return b.add("Identity", [ins[0]])
    return b.reduce(kind, ins[0], op.dims, op.keepdim)


def _index(b, op, ins, ts, out):
    """x[key] for ints, slices and None: Slice, then Gather for the ints, then Unsqueeze."""
    x, shape = ins[0], ts[0].shape
    starts, ends, axes, steps, ints, nones = [], [], [], [], [], []
    d = pos = 0
    for item in op.key:
        if item is None:
            nones.append(pos)
            pos += 1
            continue
        if type(item) is slice:
            start, stop = item.start or 0, shape[d] if item.stop is None else item.stop
            step = item.step or 1
            whole = type(start) is int and start == 0 and step == 1 and dims_equal(
                stop, shape[d]) is True
            if not whole:
                starts.append(start)
                ends.append(stop)
                axes.append(d)
                steps.append(step)
            pos += 1
        else:
            ints.append((d, item))
        d += 1
    if axes:
        x = b.add("Slice", [x, b.shape(starts), b.shape(ends), b.const(axes, _dt.int64),
                            b.const(steps, _dt.int64)])
    for axis, i in reversed(ints):  # from the last axis, so earlier axis numbers hold
        x = b.add("Gather", [x, b.scalar(i)], axis=axis)
    if nones:
        x = b.add("Unsqueeze", [x, b.const(nones, _dt.int64)])
    return x if x != ins[0] else b.add("Identity", [x])


def _cat(b, op, ins, ts, out):
    parts = [b.cast(n, t.dtype, op.dtype) for n, t, k in zip(ins, ts, op.keep) if k]
    if not parts:
        return b.const(np.zeros(0, op.dtype.np), op.dtype)
    return parts[0] if len(parts) == 1 else b.add("Concat", parts, axis=int(op.d))


def _trilu(upper: int):
    def emit(b, op, ins, ts, out):
        return b.add("Trilu", [ins[0], b.const(int(op.diagonal), _dt.int64)], upper=upper)

    return emit


def _repeat(b, op, ins, ts, out):
    x = ins[0]
    if len(op.padded) != ts[0].ndim:
        x = b.add("Reshape", [x, b.shape(op.padded)])
    return b.add("Tile", [x, b.const(list(op.sizes), _dt.int64)])


def _flip(b, op, ins, ts, out):
    if not op.axes:
        return b.add("Identity", [ins[0]])
    n = len(op.axes)
    return b.add("Slice", [ins[0], b.const([-1] * n, _dt.int64),
                           b.const([np.iinfo(np.int64).min] * n, _dt.int64),
                           b.const(list(op.axes), _dt.int64), b.const([-1] * n, _dt.int64)])


def _index_select(b, op, ins, ts, out):
    index = b.add("Reshape", [ins[1], b.const([-1], _dt.int64)])
    return b.add("Gather", [ins[0], index], axis=int(op.d))


def _gather(b, op, ins, ts, out):
    return b.add("GatherElements", [ins[0], ins[1]], axis=int(op.d))


def _masked_fill(b, op, ins, ts, out):
    return b.add("Where", [ins[1], b.const(op.value, out.dtype), ins[0]])


def _pad(b, op, ins, ts, out):
    pads = [a for a, _ in op.pairs] + [c for _, c in op.pairs]
    return b.add("Pad", [ins[0], b.shape(pads), b.const(op.value, out.dtype)])


_EMITTERS: dict | None = None


def _table() -> dict:
    from ..ops import activation as A
    from ..ops import elementwise as E
    from ..ops import linalg, movement, reduce
    from ..ops import nn as N
    from ..ops import norm as Norm
    from ..ops.nn.flash_attention import FlashAttention

    t = {
        E.Neg: _unary("Neg"), E.Abs: _unary("Abs"), E.Exp: _unary("Exp"), E.Log: _unary("Log"),
        E.Sqrt: _unary("Sqrt"), E.Sin: _unary("Sin"), E.Cos: _unary("Cos"),
        E.Tanh: _unary("Tanh"), A.Sigmoid: _unary("Sigmoid"), A.Relu: _unary("Relu"),
        E.Rsqrt: _rsqrt, E.Log1p: _log1p, E.Expm1: _expm1, A.Silu: _silu,
        A.Softplus: _softplus, A.Gelu: _gelu, E.Clamp: _clamp, E.Cast: _cast,
        E.CastToInt: _cast, E.Where: _where,
        E.Add: _binary("Add"), E.Sub: _binary("Sub"), E.Mul: _binary("Mul"),
        E.Div: _binary("Div"), E.Pow: _binary("Pow"), E.Maximum: _binary("Max"),
        E.Minimum: _binary("Min"),
        E.AddScalar: _scalar("Add"), E.RSubScalar: _scalar("Sub", reverse=True),
        E.MulScalar: _scalar("Mul"), E.DivScalar: _scalar("Div"),
        E.RDivScalar: _scalar("Div", reverse=True), E.PowScalar: _scalar("Pow"),
        E.RPowScalar: _scalar("Pow", reverse=True),
        linalg.Matmul: _matmul, linalg.Einsum: _einsum,
        movement.Reshape: _reshape, movement.Expand: _expand, movement.Permute: _permute,
        movement.Clone: _identity,
        N.Linear: _linear, N.Softmax: _softmax("Softmax"), N.LogSoftmax: _softmax("LogSoftmax"),
        Norm.LayerNorm: _layer_norm, Norm.RMSNorm: _rms_norm, N.Embedding: _embedding,
        N.Dropout: _identity, N.Attention: _attention,
        FlashAttention: _attention, A.LeakyRelu: _leaky_relu, A.Elu: _elu,
        reduce.Sum: _reduction("ReduceSum"), reduce.Mean: _reduction("ReduceMean"),
        reduce.Prod: _reduction("ReduceProd"), reduce.LogSumExp: _reduction("ReduceLogSumExp"),
        reduce.AMax: _amax,
    }
    optional = {  # ops some builds lack
        movement: {"Index": _index, "Cat": _cat, "Tril": _trilu(0), "Triu": _trilu(1),
                   "Repeat": _repeat, "Flip": _flip, "IndexSelect": _index_select,
                   "Gather": _gather, "MaskedFill": _masked_fill, "Pad": _pad},
    }
    for module, ops in optional.items():
        for cls_name, fn in ops.items():
            cls = getattr(module, cls_name, None)
            if cls is not None:
                t[cls] = fn
    return t


def emitter(op):
    """The function writing `op` as ONNX nodes, or None where there is no mapping."""
    global _EMITTERS
    if _EMITTERS is None:
        _EMITTERS = _table()
    return _EMITTERS.get(type(op))
