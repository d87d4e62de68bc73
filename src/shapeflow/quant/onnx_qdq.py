"""ONNX export of a quantized model (`sf.quant.quantize`) as QuantizeLinear / DequantizeLinear
pairs: each quantized weight is an int8 / int4 / fp8 initializer with its scales and a
DequantizeLinear (per channel: axis 0; per group: opset 21's block_size), and each quantized
activation a QDQ pair in front of the MatMul: int8 per token with the scale computed in the
graph (max |x| / 127 over the features, as QuantizedLinear does), fp8 with the calibrated
static scale (or max |x| / 448 per call when uncalibrated).

The model is exported as its float twin (each quantized module replaced by a float one with
the dequantized weight, which is what the quantized one computes with), and the twin's weight
initializers are then swapped for the quantized data. Needs opset 21.
"""

from __future__ import annotations

import copy

import numpy as np

QDQ_OPSET = 21


def is_quantized(model) -> bool:
    """Whether any module of `model` stores its weight quantized."""
    from .modules import QuantizedEmbedding, QuantizedLinear

    return any(isinstance(m, (QuantizedLinear, QuantizedEmbedding)) for m in model.modules())


def export_quantized(model, example_inputs, path, input_names=None, output_names=None,
                     dynamic_dims=("B", "L"), opset: int = QDQ_OPSET, check: bool = True):
    """`sf.onnx.export` for a quantized model: the same arguments, opset 21 at least."""
    from ..io.onnx import _need_onnx, export

    onnx = _need_onnx()
    twin, quantized = _float_twin(model)
    proto = export(twin, example_inputs, None, input_names, output_names, dynamic_dims,
                   opset=max(opset, QDQ_OPSET), check=False)
    _insert_qdq(onnx, proto, quantized)
    if check:
        onnx.checker.check_model(proto)
    if path is not None:
        onnx.save(proto, str(path))
    return proto


def _float_twin(model):
    """A copy with float Linear / Embedding modules holding the dequantized weights, and
    {qualified name: quantized module} of what they replace."""
    from ..nn import Embedding, Linear
    from ..nn.parameter import Parameter
    from ..tensor import from_numpy
    from .modules import QuantizedEmbedding, QuantizedLinear

    twin = copy.deepcopy(model)
    quantized = {}
    for name, m in list(twin.named_modules()):
        if isinstance(m, QuantizedLinear):
            f = Linear(m.in_features, m.out_features, bias=m.bias is not None)
            if m.bias is not None:
                f.bias = Parameter(from_numpy(np.array(m.bias._data, np.float32)))
        elif isinstance(m, QuantizedEmbedding):
            f = Embedding(m.num_embeddings, m.embedding_dim, padding_idx=m.padding_idx)
        else:
            continue
        f.weight = Parameter(from_numpy(m.weight_q.dequantize_numpy()))
        f.eval()
        parent, _, attr = name.rpartition(".")
        setattr(twin.get_submodule(parent) if parent else twin, attr, f)
        quantized[name] = m
    return twin, quantized


def _weight_tensors(onnx, name: str, m) -> tuple[list, dict]:
    """Initializers of a quantized weight (data, scale) and DequantizeLinear's attributes."""
    from onnx import TensorProto, numpy_helper

    from .schemes import get_scheme

    scheme = get_scheme(m.scheme)
    qt = m.weight_q
    data = f"{name}.weight_quantized"
    if scheme.weight == "int4":
        vals = qt.int_repr().astype(np.int8)
        q = onnx.helper.make_tensor(data, TensorProto.INT4, list(vals.shape),
                                    vals.ravel().tolist())
    elif scheme.weight == "int8":
        q = numpy_helper.from_array(np.ascontiguousarray(qt.qdata, np.int8), data)
    else:  # fp8-e4m3: its bit pattern, as ONNX stores FLOAT8E4M3FN raw
        bits = np.ascontiguousarray(qt.qdata).view(np.uint8)
        q = onnx.helper.make_tensor(data, TensorProto.FLOAT8E4M3FN, list(bits.shape),
                                    bits.tobytes(), raw=True)
    # DequantizeLinear's scale has the output type: per-group int4's float16 scales are
    # stored as their exact float32 widening, so the graph computes what shapeflow does
    scale = numpy_helper.from_array(np.ascontiguousarray(qt.scale, np.float32),
                                    f"{name}.weight_scale")
    attrs = {}
    if qt.group_size is not None:
        attrs = {"axis": 1, "block_size": int(qt.group_size)}
    elif qt.axis is not None:
        attrs = {"axis": int(qt.axis)}
    return [q, scale], attrs


def _insert_qdq(onnx, proto, quantized: dict) -> None:
    """Swap each float twin weight for quantized data + DequantizeLinear, and put a QDQ pair
    on the input of each Linear whose scheme quantizes activations."""
    from .modules import QuantizedLinear
    from .schemes import get_scheme

    h = onnx.helper
    g = proto.graph
    inits = {t.name: i for i, t in enumerate(g.initializer)}
    front, before = [], {}  # nodes for the graph's start; nodes to put before node i
    drop = set()
    nodes = list(g.node)
    for name, m in quantized.items():
        wname = f"{name}.weight"
        if wname not in inits:  # a module the forward never called
            continue
        drop.add(inits[wname])
        tensors, attrs = _weight_tensors(onnx, name, m)
        g.initializer.extend(tensors)
        front.append(h.make_node("DequantizeLinear", [t.name for t in tensors], [wname],
                                 name=f"{name}.weight_dq", **attrs))
        acts = get_scheme(m.scheme).activations
        if not isinstance(m, QuantizedLinear) or acts is None:
            continue
        i, matmul = _matmul_of(nodes, wname)
        x = matmul.input[0]
        qdq, out = _activation_qdq(h, g, name, x, m, acts)
        before.setdefault(i, []).extend(qdq)
        matmul.input[0] = out
    kept = [t for i, t in enumerate(g.initializer) if i not in drop]
    del g.initializer[:]
    g.initializer.extend(kept)
    ordered = list(front)
    for i, node in enumerate(nodes):
        ordered.extend(before.get(i, []))
        ordered.append(node)
    del g.node[:]
    g.node.extend(ordered)


def _matmul_of(nodes: list, wname: str):
    """(index, node) of the MatMul a Linear's weight feeds (through its Transpose)."""
    from ..errors import ExportError

    fed = {wname}
    for i, node in enumerate(nodes):
        if node.op_type == "Transpose" and node.input[0] in fed:
            fed.add(node.output[0])
        elif node.op_type == "MatMul" and node.input[1] in fed:
            return i, node
    raise ExportError(f"ONNX export: no MatMul reads {wname}", op="onnx.export")


def _activation_qdq(h, g, name: str, x: str, m, acts: str) -> tuple[list, str]:
    """Nodes quantizing and dequantizing the Linear input `x` as the module does."""
    from onnx import TensorProto, numpy_helper

    def const(suffix: str, value, dtype=np.float32) -> str:
        cname = f"{name}.{suffix}"
        g.initializer.append(numpy_helper.from_array(np.asarray(value, dtype), cname))
        return cname

    p = f"{name}.input"
    nodes = []
    if acts == "int8":  # per token: one scale per row of features, max |x| / 127
        nodes += [h.make_node("Abs", [x], [f"{p}_abs"]),
                  h.make_node("ReduceMax", [f"{p}_abs", const("input_axes", [-1], np.int64)],
                              [f"{p}_amax"], keepdims=1)]
        top, qtype, block = 127.0, TensorProto.INT8, {"axis": -1, "block_size": m.in_features}
    else:  # fp8-e4m3: one scale for the tensor
        top, qtype, block = 448.0, TensorProto.FLOAT8E4M3FN, {}
        if "input_scale" in m._buffers:
            scale = const("input_scale", np.float32(m.input_scale._data))
        else:
            nodes += [h.make_node("Abs", [x], [f"{p}_abs"]),
                      h.make_node("ReduceMax", [f"{p}_abs"], [f"{p}_amax"], keepdims=0)]
    if acts == "int8" or "input_scale" not in m._buffers:
        # an all-zero row (or tensor) gets scale 1, as in QuantizedLinear
        nodes += [h.make_node("Div", [f"{p}_amax", const("input_top", top)], [f"{p}_s0"]),
                  h.make_node("Equal", [f"{p}_s0", const("input_zero", 0.0)], [f"{p}_iszero"]),
                  h.make_node("Where", [f"{p}_iszero", const("input_one", 1.0), f"{p}_s0"],
                              [f"{p}_scale"])]
        scale = f"{p}_scale"
    nodes += [h.make_node("QuantizeLinear", [x, scale], [f"{p}_q"], output_dtype=qtype,
                          name=f"{p}_quantize", **block),
              h.make_node("DequantizeLinear", [f"{p}_q", scale], [f"{p}_dq"],
                          name=f"{p}_dequantize", **block)]
    return nodes, f"{p}_dq"


def install() -> None:
    """Make `sf.onnx.export` write quantized models this way (once, at `import sf.quant`)."""
    from ..io import onnx as _onnx

    if not any(fn is export_quantized for _, fn in _onnx.MODEL_EXPORTERS):
        _onnx.MODEL_EXPORTERS.append((is_quantized, export_quantized))
