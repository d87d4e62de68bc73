"""A quantized model exported to ONNX as QuantizeLinear / DequantizeLinear pairs, run by
onnxruntime against shapeflow's quantized outputs.

Tolerance: both sides round the same values the same way (scales max|x| / 127 in float32,
round half to even, the same clamps), so they differ only in float32 summation order:
1e-5 of the output's largest value, far inside one quantization step (max|y| / 127). The
sessions run with basic graph optimizations: onnxruntime's extended ones rewrite a weight-
only DequantizeLinear + MatMul into a dynamically quantized MatMul, which changes the numbers
(int8-weight then differs by about one int8 step)."""

import numpy as np
import pytest

import shapeflow as sf

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, numpy_helper  # noqa: E402

WEIGHT_TYPES = {"int8": TensorProto.INT8, "int8-weight": TensorProto.INT8,
                "int4-g32": TensorProto.INT4, "fp8-e4m3": TensorProto.FLOAT8E4M3FN}


def _session(path):
    onnx.checker.check_model(onnx.load(str(path)))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _check(path, qmodel, x):
    sess = _session(path)
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
    with sf.no_grad():
        want = qmodel(x)
    want = (want[0] if isinstance(want, tuple) else want).numpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("scheme", ["int8", "int8-weight", "int4-g32", "fp8-e4m3",
                                    "fp8-e4m3 calibrated"])
def test_mlp_schemes_as_qdq(scheme, tmp_path):
    sf.manual_seed(0)
    model = sf.models.MLP(32, [64], 10).eval()
    name = scheme.split()[0]
    calib = [sf.randn(16, 32)] if "calibrated" in scheme else None
    q = sf.quant.quantize(model, name, calibration=calib)
    path = tmp_path / "q.onnx"
    proto = sf.onnx.export(q, sf.randn(2, 32), path)
    assert proto.opset_import[0].version >= 21
    g = proto.graph
    inits = {t.name: t for t in g.initializer}
    for layer in ("net.0", "net.2"):
        assert f"{layer}.weight" not in inits  # no float copy of a quantized weight
        data = inits[f"{layer}.weight_quantized"]
        assert data.data_type == WEIGHT_TYPES[name]
        if name in ("int8", "int8-weight"):
            np.testing.assert_array_equal(numpy_helper.to_array(data),
                                          q.get_submodule(layer).weight_qdata.numpy())
        scale = numpy_helper.to_array(inits[f"{layer}.weight_scale"])
        # DequantizeLinear takes the scale in the output type: float16 scales (int4-g32)
        # as their exact float32 widening
        assert scale.dtype == np.float32
        np.testing.assert_array_equal(
            scale, q.get_submodule(layer).weight_scale.numpy().astype(np.float32))
    dq = [n for n in g.node if n.op_type == "DequantizeLinear" and n.output[0].endswith(
        ".weight")]
    assert len(dq) == 2
    attrs = {a.name: a.i for a in dq[0].attribute}
    assert attrs == {"int8": {"axis": 0}, "int8-weight": {"axis": 0},
                     "int4-g32": {"axis": 1, "block_size": 32}, "fp8-e4m3": {}}[name]
    quantize_nodes = [n for n in g.node if n.op_type == "QuantizeLinear"]
    assert len(quantize_nodes) == (0 if name in ("int8-weight", "int4-g32") else 2)
    if name == "int8":  # per token: one scale per row of the 32 (then 64) features
        blocks = [{a.name: a.i for a in n.attribute}["block_size"] for n in quantize_nodes]
        assert blocks == [32, 64]
    if calib:  # a static scale: the calibrated one, as an initializer
        s = numpy_helper.to_array(inits["net.0.input_scale"])
        assert s == q.net[0].input_scale.numpy()
    _check(path, q, sf.randn(7, 32))  # another batch size: B stayed dynamic


@pytest.mark.parametrize("scheme", ["int8", "fp8-e4m3"])
def test_vit_and_gpt(scheme, tmp_path):
    from shapeflow.cli.demo import DEMO_VIT

    sf.manual_seed(0)
    vit = sf.quant.quantize(sf.models.ViT(**DEMO_VIT).eval(), scheme)
    sf.onnx.export(vit, sf.randn(2, 1, 8, 8), tmp_path / "vit.onnx")
    _check(tmp_path / "vit.onnx", vit, sf.randn(3, 1, 8, 8))
    gpt = sf.models.GPT(vocab_size=40, block_size=16, n_layer=2, n_head=2, n_embd=32).eval()
    q = sf.quant.quantize(gpt, scheme)
    proto = sf.onnx.export(q, sf.randint(0, 40, (2, 16)), tmp_path / "gpt.onnx")
    # the token table (tied to lm_head) and the positions: DequantizeLinear before Gather
    outs = {n.output[0] for n in proto.graph.node if n.op_type == "DequantizeLinear"}
    assert {"transformer.wte.weight", "transformer.wpe.weight"} <= outs
    _check(tmp_path / "gpt.onnx", q, sf.randint(0, 40, (3, 12)))


def test_only_the_quantized_modules_get_qdq(tmp_path):
    sf.manual_seed(0)
    model = sf.models.MLP(32, [64], 10).eval()
    q = sf.quant.quantize(model, "int8", modules=["net.2"])
    proto = sf.onnx.export(q, sf.randn(2, 32), tmp_path / "q.onnx")
    inits = {t.name for t in proto.graph.initializer}
    assert "net.0.weight" in inits and "net.2.weight" not in inits
    assert "net.2.weight_quantized" in inits and "net.0.weight_quantized" not in inits
    _check(tmp_path / "q.onnx", q, sf.randn(4, 32))
