"""sf.graph: the recorded computation graph as nodes, edges, clusters and a drawing."""

import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.cli.graph import Figure2
from shapeflow.cli.graph import main as graph_main
from shapeflow.inspect import graph as graph_mod
from shapeflow.inspect.graph import RenderError, graph
from shapeflow.ops.base import saved_arrays

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


def kinds_and_names(g):
    return [(n.kind, n.name) for n in g.nodes]


def edge_set(g, kind="data"):
    name = {n.id: n.name for n in g.nodes}
    return {(name[e.src], name[e.dst], e.label) for e in g.edges if e.kind == kind}


# ---- Figure 2: relu(W @ x + b) ------------------------------------------------------------
def test_figure2_traced_symbolic_nodes_and_edges():
    g = graph(Figure2(), sf.empty(784, "B", device="meta"))
    assert kinds_and_names(g) == [
        ("input", "x"), ("parameter", "W"), ("op", "matmul"), ("constant", "b"),
        ("op", "add"), ("op", "relu"), ("output", "output"),
    ]
    assert edge_set(g) == {
        ("W", "matmul", "[100, 784] f32"),
        ("x", "matmul", "[784, B] f32"),
        ("matmul", "add", "[100, B] f32"),
        ("b", "add", "[100, 1] f32"),
        ("add", "relu", "[100, B] f32"),
        ("relu", "output", "[100, B] f32"),
    }
    assert len(g.edges) == 6
    assert g.node("x").label == "x\n[784, B] f32"
    # backward keeps x (for dW) and relu's output; W needs no saving: x does not require grad
    assert [s.what for s in g.node("matmul").saved] == ["input 1"]
    assert [s.what for s in g.node("relu").saved] == ["output"]
    assert g.node("add").saved == []
    B = sf.Dim("B")
    assert g.node("matmul").saved_bytes == 784 * 4 * B
    assert g.saved_bytes == (784 + 100) * 4 * B
    saved_edges = {(g.by_id(e.src).name, g.by_id(e.dst).name) for e in g.edges if e.saved}
    assert saved_edges == {("x", "matmul"), ("relu", "output")}


def test_figure2_recorded_graph():
    W = sf.randn(100, 784, requires_grad=True)
    b = sf.zeros(100, 1)
    x = sf.randn(784, 3, requires_grad=True)
    y = sf.relu(W @ x + b)
    g = graph(y, params={"W": W})
    assert kinds_and_names(g) == [
        ("parameter", "W"), ("input", "input"), ("op", "matmul"), ("constant", "constant"),
        ("op", "add"), ("op", "relu"), ("output", "output"),
    ]
    assert edge_set(g) == {
        ("W", "matmul", "[100, 784] f32"), ("input", "matmul", "[784, 3] f32"),
        ("matmul", "add", "[100, 3] f32"), ("constant", "add", "[100, 1] f32"),
        ("add", "relu", "[100, 3] f32"), ("relu", "output", "[100, 3] f32"),
    }
    # both operands require grad here, so matmul keeps both
    assert sorted(s.what for s in g.node("matmul").saved) == ["input 0", "input 1"]


def test_traced_function_names_leaves_from_its_closure():
    W = sf.randn(4, 3, requires_grad=True)
    b = sf.zeros(4, 1)
    g = graph(lambda x: sf.relu(W @ x + b), sf.randn(3, 2))
    assert kinds_and_names(g) == [
        ("input", "x"), ("parameter", "W"), ("op", "matmul"), ("constant", "b"),
        ("op", "add"), ("op", "relu"), ("output", "output"),
    ]


def test_figure2_backward_edges():
    g = graph(Figure2(), sf.empty(784, "B", device="meta"), backward=True)
    assert edge_set(g, "grad") == {
        ("output", "relu", "[100, B] f32"), ("relu", "add", "[100, B] f32"),
        ("add", "matmul", "[100, B] f32"), ("matmul", "W", "[100, 784] f32"),
    }  # no gradient flows to the input x or the constant b
    dot = g.to_dot()
    assert dot.count("style=dashed") == 4 and "grad [100, 784] f32" in dot


# ---- modules, clusters, depth ------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self, d=8, n=3, classes=5):
        super().__init__()
        self.embed = nn.Linear(4, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.embed(x.reshape(x.shape[0], -1, 4))
        for block in self.blocks:
            x = block(x)
        return self.head(x).softmax(-1)


def test_parameters_named_by_module_path_and_ops_clustered():
    g = graph(Net(), sf.empty("B", 3, 4, device="meta"))
    names = [n.name for n in g.nodes if n.kind == "parameter"]
    assert names[:2] == ["embed.weight", "embed.bias"]
    assert "blocks.2.mlp.2.weight" in names and len(names) == 2 + 3 * 6 + 2
    ln = [n for n in g.nodes if n.name == "layer_norm"]
    assert [n.stack for n in ln] == [("blocks.0", "blocks.0.norm"), ("blocks.1", "blocks.1.norm"),
                                     ("blocks.2", "blocks.2.norm")]
    assert g.node("blocks.0.norm.weight").stack == ("blocks.0", "blocks.0.norm")
    first_linear = g.node("linear")
    assert first_linear.stack == ("embed",)
    assert {e.label for e in g.edges if e.dst == first_linear.id} == {
        "[B, 3, 4] f32", "[8, 4] f32", "[8] f32"}
    dot = g.to_dot()
    assert 'label="blocks.1.mlp (Sequential)"' in dot and 'label="embed (Linear)"' in dot


@pytest.mark.parametrize("depth,expected", [
    (0, 3),  # x -> Net -> output
    (1, 2 + 5 + 2),  # x, output; embed, 3 blocks, head; the top-level reshape and softmax
    # blocks open into norm, mlp and the residual add; embed and head (no submodules) open
    # into their linear op and its weight and bias
    (2, 2 + 2 + 3 * 3 + 2 * 3),
])
def test_depth_collapses_modules_into_nodes(depth, expected):
    g = graph(Net(), sf.empty("B", 3, 4, device="meta"), depth=depth)
    assert len(g.nodes) == expected
    if depth == 1:
        assert [n.name for n in g.nodes if n.kind == "module"] == [
            "embed", "blocks.0", "blocks.1", "blocks.2", "head"]
        assert [n.name for n in g.nodes if n.kind == "op"] == ["reshape", "softmax"]
        name = {n.id: n.name for n in g.nodes}
        chain = [(name[e.src], name[e.dst]) for e in g.edges]
        assert ("blocks.0", "blocks.1") in chain and len(chain) == len(set(chain)) == 8
        # a module node keeps what its ops save
        full = graph(Net(), sf.empty("B", 3, 4, device="meta"))
        inside = [n for n in full.nodes if n.stack[:1] == ("blocks.1",)]
        assert g.node("blocks.1").saved_bytes == sum(
            (s.nbytes for s in graph_mod._dedup(x for n in inside for x in n.saved)), 0)


def test_vit_collapsed_to_its_blocks():
    vit = sf.models.ViT(image_size=16, patch_size=4, in_channels=3, num_classes=10, dim=32,
                        depth=3, heads=4)
    g = graph(vit, sf.empty("B", 3, 16, 16, device="meta"), depth=1)
    assert [(n.kind, n.name) for n in g.nodes] == [
        ("input", "image"), ("module", "patchify"), ("module", "project"),
        ("parameter", "cls_token"), ("op", "expand"), ("op", "cat"), ("parameter", "pos_embed"),
        ("op", "add"), ("module", "blocks.0"), ("module", "blocks.1"), ("module", "blocks.2"),
        ("module", "norm"), ("op", "getitem"), ("module", "head"), ("output", "output")]
    assert g.node("blocks.0").detail.startswith("Block, ")
    assert {e.label for e in g.edges if g.by_id(e.src).name.startswith("blocks")} == {
        "[B, 17, 32] f32"}
    full = graph(vit, sf.empty("B", 3, 16, 16, device="meta"))
    assert len(full.nodes) > 3 * len(g.nodes)
    assert g.saved_bytes == full.saved_bytes  # collapsing hides nodes, not memory
    names = {n.name for n in full.nodes if n.kind == "parameter"}
    assert "blocks.0.attn.qkv.weight" in names and "blocks.2.mlp.3.bias" in names
    ops = {n.name for n in full.nodes if n.kind == "op"}
    assert {"layer_norm", "linear", "scaled_dot_product_attention", "gelu", "permute"} <= ops


def test_gpt_collapsed_keeps_the_tied_embedding():
    gpt = sf.models.GPT(vocab_size=64, block_size=16, n_layer=3, n_head=4, n_embd=32)
    g = graph(gpt, sf.empty("B", 8, dtype=sf.int64, device="meta"), depth=1)
    assert [(n.kind, n.name) for n in g.nodes] == [
        ("input", "idx"), ("parameter", "transformer.wte.weight"), ("module", "transformer.wte"),
        ("module", "transformer.wpe"), ("op", "add"), ("module", "transformer.h.0"),
        ("module", "transformer.h.1"), ("module", "transformer.h.2"),
        ("module", "transformer.ln_f"), ("module", "lm_head"), ("output", "output")]
    name = {n.id: n.name for n in g.nodes}
    tied = {name[e.dst] for e in g.edges if name[e.src] == "transformer.wte.weight"}
    assert tied == {"transformer.wte", "lm_head"}
    assert g.node("output").shape == (sf.Dim("B"), 8, 64)


def test_collapse_keeps_tied_parameter_visible():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 4)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    g = graph(Tied(), sf.randn(2, 4), depth=1)
    assert [n.name for n in g.nodes] == ["x", "a.weight", "a", "b", "output"]


# ---- saved tensors: what the drawing marks is what the nodes hold ----------------------------
def _recorded_nodes(root):
    seen, stack, out = set(), [root.grad_fn], []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen or not hasattr(n, "next"):
            continue
        seen.add(id(n))
        out.append(n)
        stack += [m for m in n.next[0::3] if hasattr(m, "next")]
    return out


@pytest.mark.parametrize("make,shape", [
    (lambda: Net(), (2, 3, 4)),
    (lambda: Figure2(12, 5), (12, 3)),
    (lambda: nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 3)), (4, 6)),
])
def test_saved_marks_match_what_a_training_step_holds(make, shape):
    sf.manual_seed(0)
    model = make()
    x = sf.randn(*shape)
    g = graph(model, x)
    y = model(x)  # the training step the drawing stands for
    real = sorted((n.name, sum(a.nbytes for a in saved_arrays(n)))
                  for n in _recorded_nodes(y))
    drawn = sorted((n.name, n.saved_bytes) for n in g.nodes if n.kind == "op" and n.recorded)
    assert drawn == real
    # ops before any parameter are drawn, but record nothing in training
    assert all(n.saved == [] for n in g.nodes if n.kind == "op" and not n.recorded)
    assert g.saved_bytes == sf.summary(model, x).total_saved_bytes


def test_saved_marks_of_a_recorded_graph_are_saved_arrays():
    model = Net()
    y = model(sf.randn(2, 3, 4))
    g = graph(y, params=model)
    by_op = {id(n.op): n for n in g.nodes if n.kind == "op"}
    for node in _recorded_nodes(y):
        assert by_op[id(node)].saved_bytes == sum(a.nbytes for a in saved_arrays(node))
    assert {n.name for n in g.nodes if n.kind == "parameter"} == {
        name for name, _ in model.named_parameters()}
    y.sum().backward()  # frees what the nodes kept: the graph shows nothing saved any more
    assert graph(y).saved_bytes == 0


# ---- output ---------------------------------------------------------------------------------
def test_to_dot_needs_nothing_and_names_every_node():
    g = graph(Figure2(), sf.empty(784, "B", device="meta"))
    dot = g.to_dot()
    assert dot.startswith("digraph shapeflow {") and dot.rstrip().endswith("}")
    for n in g.nodes:
        assert f"{n.id} [label=" in dot
    assert '"matmul\\nsaves 3.1 KiB × B"' in dot and '"relu\\nsaves 400 bytes × B"' in dot
    assert "<Graph: 1 input, 1 parameter, 3 ops, 1 constant, 1 output" in repr(g)


@needs_dot
@pytest.mark.parametrize("backward", [False, True])
def test_render_svg_parses(tmp_path, backward):
    g = graph(Net(), sf.empty("B", 3, 4, device="meta"), depth=1, backward=backward)
    path = g.render(tmp_path / "net.svg")
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    texts = {t.text for t in root.iter() if t.tag.endswith("text")}
    assert {"blocks.0", "embed", "softmax"} <= texts
    svg = g._repr_svg_()
    assert ET.fromstring(svg).tag.endswith("svg")
    assert g.render(tmp_path / "net.png").read_bytes()[:4] == b"\x89PNG"


def test_render_without_dot_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(graph_mod.shutil, "which", lambda name: None)
    g = graph(Figure2(), sf.empty(784, "B", device="meta"))
    with pytest.raises(RenderError, match="dot") as info:
        g.render(tmp_path / "g.svg")
    assert isinstance(info.value, sf.ShapeflowError) and "graphviz" in str(info.value)
    assert g._repr_svg_() is None  # Jupyter falls back to the repr
    assert g.render(tmp_path / "g.dot").read_text() == g.to_dot()


def test_cli_writes_dot_and_svg(tmp_path, capsys):
    assert graph_main(["shapeflow.cli.graph:figure2", "--input", "784,B"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("digraph") and "[784, B] f32" in out
    if shutil.which("dot"):
        target = tmp_path / "f.svg"
        args = ["shapeflow.cli.graph:figure2", "--input", "784,B", "-o", str(target),
                "--backward"]
        assert graph_main(args) == 0
        assert ET.parse(target).getroot().tag.endswith("svg")


def test_graph_needs_tensors_or_a_model():
    with pytest.raises(TypeError):
        graph()
    with pytest.raises(TypeError):
        graph(3)


def test_values_are_unchanged_by_tracing():
    model = Net()
    x = sf.randn(2, 3, 4)
    before = model(x).detach().numpy()
    graph(model, x)
    np.testing.assert_array_equal(model(x).detach().numpy(), before)
    assert not x.requires_grad and x.grad is None


@pytest.mark.parametrize("name", ["mlp", "vit", "gpt"])
def test_saved_tensors_marked_match_the_memory_report(name):
    from shapeflow.models import GPT, MLP, ViT

    model, x = {
        "mlp": lambda: (MLP(784, [256], 10), sf.empty("B", 784, device="meta")),
        "vit": lambda: (ViT(8, 2, 1, 10, 64, 2, 4, dropout=0.1),
                        sf.empty("B", 1, 8, 8, device="meta")),
        "gpt": lambda: (GPT(50, 32, 2, 4, 32, dropout=0.1),
                        sf.empty("B", "L", dtype=sf.int64, device="meta")),
    }[name]()
    g = graph(model, x)
    rep = sf.memory.report(model, x)  # loss = output.sum(), which saves nothing more
    assert g.saved_bytes == rep.activations
    marked = sum(n.activation_bytes for n in g.nodes if n.kind == "op")
    assert marked.subs(B=3, **({"L": 5} if name == "gpt" else {})) >= rep.activations.subs(
        B=3, **({"L": 5} if name == "gpt" else {}))  # per node, before sharing is removed
