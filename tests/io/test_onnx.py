"""sf.onnx.export: the inference graph of the reference models, checked by onnxruntime."""

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _session(path):
    onnx.checker.check_model(onnx.load(str(path)))
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _reference(model, *xs):
    with sf.no_grad():
        out = model(*xs)
    out = out[0] if isinstance(out, tuple) else out
    return out.numpy()


def _check(sess, model, *xs):
    feeds = {i.name: x.numpy() for i, x in zip(sess.get_inputs(), xs)}
    got = sess.run(None, feeds)[0]
    want = _reference(model, *xs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_mlp_round_trip(tmp_path):
    sf.manual_seed(0)
    model = sf.models.MLP(16, [32, 24], 10)
    path = tmp_path / "mlp.onnx"
    proto = sf.onnx.export(model, sf.randn(4, 16), path)
    assert [i.name for i in proto.graph.input] == ["x"]
    assert _dims(proto.graph.input[0]) == ["B", 16]  # features stay fixed: L cannot be
    assert _dims(proto.graph.output[0]) == ["B", 10]
    assert {init.name for init in proto.graph.initializer} >= {"net.0.weight", "net.2.bias"}
    sess = _session(path)
    for batch in (3, 7):
        _check(sess, model, sf.randn(batch, 16))


def test_vit_round_trip(tmp_path):
    sf.manual_seed(0)
    model = sf.models.ViT(image_size=16, patch_size=4, in_channels=3, num_classes=10, dim=32,
                          depth=2, heads=4)
    path = tmp_path / "vit.onnx"
    proto = sf.onnx.export(model, sf.randn(2, 3, 16, 16), path)
    assert _dims(proto.graph.input[0]) == ["B", 3, 16, 16]
    assert _dims(proto.graph.output[0]) == ["B", 10]
    sess = _session(path)
    for batch in (2, 5):
        _check(sess, model, sf.randn(batch, 3, 16, 16))
    assert model.training  # export leaves the model's mode as it found it


def test_gpt_round_trip_batch_and_length(tmp_path):
    sf.manual_seed(0)
    model = sf.models.GPT(vocab_size=64, block_size=16, n_layer=2, n_head=4, n_embd=32)
    path = tmp_path / "gpt.onnx"
    idx = sf.randint(0, 64, (2, 8))
    proto = sf.onnx.export(model, idx, path, output_names=["logits"])
    assert [o.name for o in proto.graph.output] == ["logits"]
    assert _dims(proto.graph.input[0]) == ["B", "L"]
    assert _dims(proto.graph.output[0]) == ["B", "L", 64]
    sess = _session(path)
    for batch, length in ((2, 8), (3, 8), (2, 5), (3, 12)):
        _check(sess, model, sf.randint(0, 64, (batch, length)))


def test_symbolic_example_inputs_name_the_dims(tmp_path):
    model = sf.models.MLP(6, 8, 3)
    proto = sf.onnx.export(model, sf.empty("N", 6, device="meta"), tmp_path / "m.onnx")
    assert _dims(proto.graph.input[0]) == ["N", 6]
    sess = _session(tmp_path / "m.onnx")
    _check(sess, model, sf.randn(5, 6))


def test_fixed_sizes_and_explicit_dims(tmp_path):
    model = sf.models.MLP(6, 8, 3)
    fixed = sf.onnx.export(model, sf.randn(4, 6), tmp_path / "a.onnx", dynamic_dims=(),
                           input_names=["features"], output_names=["scores"])
    assert _dims(fixed.graph.input[0]) == [4, 6] and fixed.graph.input[0].name == "features"
    named = sf.onnx.export(model, sf.randn(4, 6), tmp_path / "b.onnx",
                           dynamic_dims={"x": {0: "batch"}})
    assert _dims(named.graph.input[0]) == ["batch", 6]
    with pytest.raises(sf.ShapeError):  # asked for explicitly, so it is not dropped silently
        sf.onnx.export(model, sf.randn(4, 6), tmp_path / "c.onnx", dynamic_dims={0: {1: "F"}})


def test_unmapped_op_raises_naming_it(tmp_path):
    class Cumulative(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x).cumsum(-1)

    with pytest.raises(sf.ExportError, match="cumsum") as info:
        sf.onnx.export(Cumulative(), sf.randn(2, 4), tmp_path / "x.onnx")
    assert info.value.op == "cumsum"
    assert not (tmp_path / "x.onnx").exists()


def test_export_needs_a_module(tmp_path):
    with pytest.raises(sf.ExportError, match="Module"):
        sf.onnx.export(lambda x: x, sf.randn(2), tmp_path / "f.onnx")
