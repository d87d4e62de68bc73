"""sf.memory: the report checked against the real graph, tracemalloc, and published figures."""

import gc
import tracemalloc

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.cli import main as cli_main
from shapeflow.inspect.memory import MemoryPlanError, kv_cache_bytes, report
from shapeflow.models import GPT, MLP, CharLSTM, ViT
from shapeflow.nn import functional as F
from shapeflow.ops import base


# ---- the reference models, as a training step sees them -----------------------------------
def mlp_case():
    x, y = sf.randn(128, 784), sf.randint(0, 10, (128,))
    return MLP(784, [256, 256], 10), (x,), F.cross_entropy, y


def vit_case():
    x, y = sf.randn(64, 1, 8, 8), sf.randint(0, 10, (64,))
    return ViT(8, 2, 1, 10, 64, 2, 4, dropout=0.1), (x,), F.cross_entropy, y


def gpt_case():
    idx = sf.randint(0, 65, (16, 64))
    return GPT(65, 64, 2, 4, 128, dropout=0.1), (idx, idx), None, None


def resnet_case():  # BatchNorm CNN: BatchNorm inputs dominate what backward keeps
    from shapeflow.models import ResNet

    x, y = sf.randn(32, 1, 8, 8), sf.randint(0, 10, (32,))
    return ResNet((1, 1, 1), 10, 1, 16, small_input=True), (x,), F.cross_entropy, y


def lstm_case():
    idx = sf.randint(0, 65, (16, 64))
    return CharLSTM(65, 32, 128, 2, dropout=0.1), (idx, idx), None, None


CASES = {"mlp": mlp_case, "vit": vit_case, "gpt": gpt_case, "resnet": resnet_case,
         "lstm": lstm_case}


def run_step(model, inputs, loss_fn, target):
    out = model(*inputs)
    loss = loss_fn(out, target) if loss_fn is not None else out[1]
    return out, loss


def _owner(a):
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def held_by_graph(loss, params) -> int:
    """Bytes of the distinct buffers the recorded graph keeps for backward (not parameters)."""
    skip = {id(_owner(p._data)) for p in params}
    seen, total, stack, visited = set(), 0, [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or isinstance(node, sf.Tensor) or id(node) in visited:
            continue
        visited.add(id(node))
        for arr in base.saved_arrays(node):
            o = _owner(arr)
            if id(o) not in skip and id(o) not in seen:
                seen.add(id(o))
                total += o.nbytes
        stack += list(node.next[0::3])
    return total


@pytest.mark.parametrize("name", CASES)
def test_activations_equal_what_the_graph_holds(name):
    sf.manual_seed(0)
    model, inputs, loss_fn, target = CASES[name]()
    rep = report(model, *inputs, loss_fn=loss_fn, target=target)
    _, loss = run_step(model, inputs, loss_fn, target)
    assert rep.activations == held_by_graph(loss, list(model.parameters()))
    assert rep.activations == sum(rep.by_kind.values())


def measured_step_peak(step, model, inputs, loss_fn, target, opt) -> int:
    """tracemalloc's peak of one training step (`step` runs forward and loss) above what
    was live before it, after a warm-up step that makes the optimizer's state."""
    out, loss = step(model, inputs, loss_fn, target)
    loss.backward()
    opt.step()
    opt.zero_grad()
    del out, loss
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out, loss = step(model, inputs, loss_fn, target)
        loss.backward()
        opt.step()  # with the output and loss still held, as in a training loop
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


# not the ResNet: its convolutions' im2col scratch (k*k copies of a layer's input, freed
# inside the kernel) is NumPy's, which the tracker does not see (tracker.py)
@pytest.mark.parametrize("name", ["mlp", "vit", "gpt"])
def test_peak_within_5_percent_of_tracemalloc(name):
    sf.manual_seed(0)
    model, inputs, loss_fn, target = CASES[name]()
    opt = sf.optim.AdamW(model.parameters())
    rep = report(model, *inputs, loss_fn=loss_fn, target=target, optimizer=opt)
    measured = measured_step_peak(run_step, model, inputs, loss_fn, target, opt)
    predicted = rep.peak - rep.baseline
    assert abs(predicted - measured) <= 0.05 * measured, (predicted, measured)
    # the optimizer's declared state is what AdamW allocated
    assert rep.optimizer_state == sum(t.nbytes for s in opt.state.values() for k, t in s.items()
                                      if k != "step")


# ---- Korthikanti et al. 2022: sbh(34 + 5as/h) per block ------------------------------------
KORTHIKANTI = [(32, 2, 64, 4), (64, 3, 96, 6), (128, 1, 128, 8)]  # s, b, h, a


def gpt_block_report(s, b, h, a, **kw):
    model = GPT(vocab_size=97, block_size=s, n_layer=2, n_head=a, n_embd=h, dropout=0.1,
                device="meta")
    idx = sf.empty(b, s, dtype=sf.int64, device="meta")
    kw.setdefault("attention", "math")  # the kernel Korthikanti et al. count (P kept)
    return report(model, idx, idx, precision="bf16-true", optimizer="adamw", **kw)


@pytest.mark.parametrize("s,b,h,a", KORTHIKANTI)
def test_gpt_block_activations_match_korthikanti(s, b, h, a):
    row = gpt_block_report(s, b, h, a).row("transformer.h.1")
    stats = row.by_kind[base.NORM_STATS]
    assert stats == 2 * 2 * s * b * 4  # two LayerNorms, fp32 mean and rstd per row, apart
    assert row.activations - stats == pytest.approx(s * b * h * (34 + 5 * a * s / h), rel=0.01)
    assert row.by_kind[base.DROPOUT_MASK] == 2 * s * b * h + a * s * s * b  # 1 byte each


@pytest.mark.parametrize("s,b,h,a", KORTHIKANTI[:2])
@pytest.mark.parametrize("t", [2, 4])
def test_tensor_and_sequence_parallel_split_as_table_2(s, b, h, a, t):
    rep = gpt_block_report(s, b, h, a)
    block = [x for x in rep.saved if x.path.startswith("transformer.h.0.")
             and x.kind != base.NORM_STATS]
    tp = sum(x.nbytes / t if x.sharded else x.nbytes for x in block)
    assert tp == pytest.approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), rel=0.01)
    plan_tp = rep.plan(devices=t, tensor_parallel=t)
    plan_sp = rep.plan(devices=t, tensor_parallel=t, sequence_parallel=True)
    assert plan_sp.activations == pytest.approx(rep.activations / t)
    assert plan_tp.activations == pytest.approx(
        sum(x.nbytes / t if x.sharded else x.nbytes for x in rep.saved))


# ---- ZeRO (Rajbhandari et al. 2020): 7.5B parameters on 64 devices --------------------------
def test_zero_stages_match_the_paper():
    model = nn.Linear(75_000, 100_000, bias=False, device="meta")  # 7.5B parameters
    x = sf.empty(1, 75_000, device="meta")
    rep = report(model, x, optimizer="adamw", precision="bf16-true")
    assert rep.params + rep.grads + rep.optimizer_state == 16 * 7_500_000_000  # 2 + 2 + 12
    gb = [rep.plan(devices=64, zero=k).model_states / 1e9 for k in range(4)]
    assert [round(g, 1) for g in gb] == [120.0, 31.4, 16.6, 1.9]


def test_kv_cache_of_llama_shaped_configs():
    llama7 = {"num_hidden_layers": 32, "num_attention_heads": 32, "head_dim": 128}
    assert kv_cache_bytes(llama7, batch=1, seq_len=4096, dtype="float16") == 2_147_483_648
    llama70 = {"num_hidden_layers": 80, "num_attention_heads": 64, "head_dim": 128,
               "num_key_value_heads": 8}
    assert kv_cache_bytes(llama70, batch=1, seq_len=4096, dtype=sf.float16) == 1_342_177_280
    gpt = GPT(50, 16, 3, 4, 32, device="meta")
    assert kv_cache_bytes(gpt, 2, 16, "float32") == 2 * 3 * 4 * 8 * 16 * 2 * 4
    with pytest.raises(MemoryPlanError):
        kv_cache_bytes({"n_layer": 2}, 1, 1)


# ---- checkpointing ---------------------------------------------------------------------------
def _gpt_grads(checkpoint: bool):
    sf.manual_seed(3)
    model = GPT(40, 16, 2, 2, 16, dropout=0.2, checkpoint=checkpoint)
    sf.manual_seed(4)
    idx = sf.randint(0, 40, (3, 16))
    _, loss = model(idx, idx)
    loss.backward()
    return loss.item(), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def test_checkpointed_gpt_gradients_are_bitwise_equal():
    loss_a, plain = _gpt_grads(False)
    loss_b, ckpt = _gpt_grads(True)
    assert loss_a == loss_b
    for name in plain:
        np.testing.assert_array_equal(plain[name], ckpt[name], err_msg=name)


def test_checkpoint_function_gradients_equal():
    w = sf.randn(8, 8, requires_grad=True)
    x = sf.randn(4, 8, requires_grad=True)

    def block(t):
        return F.gelu(t @ w).tanh()

    block(x).sum().backward()
    plain = (x.grad.numpy().copy(), w.grad.numpy().copy())
    x.grad = w.grad = None
    sf.checkpoint(block, x).sum().backward()
    np.testing.assert_array_equal(plain[0], x.grad.numpy())
    np.testing.assert_array_equal(plain[1], w.grad.numpy())


def test_report_shows_what_checkpointing_saves():
    s, b, h, a = 32, 2, 64, 4
    plain = gpt_block_report(s, b, h, a)
    ckpt = gpt_block_report(s, b, h, a, checkpoint=True)
    assert ckpt.activations_without_checkpoint == plain.activations
    assert ckpt.row("transformer.h.1").activations == 2 * s * b * h  # only the block input
    assert ckpt.activations < plain.activations / 5
    assert "without recomputation" in str(ckpt)
    own = report(GPT(97, s, 2, a, h, dropout=0.1, checkpoint=True, device="meta"),
                 *(sf.empty(b, s, dtype=sf.int64, device="meta"),) * 2,
                 precision="bf16-true")
    assert own.activations == ckpt.activations  # GPT(checkpoint=True) saves the same


# ---- symbolic sizes, inference, unreached parameters -----------------------------------------
def test_symbolic_report_evaluated_equals_concrete():
    model = GPT(50, 32, 2, 4, 32, dropout=0.1)
    idx = sf.empty("B", "L", dtype=sf.int64, device="meta")
    sym = report(model, idx, idx, optimizer="adam")
    for B, L in ((2, 8), (3, 32)):
        concrete = report(model, *(sf.empty(B, L, dtype=sf.int64, device="meta"),) * 2,
                          optimizer="adam")
        at = sym.subs(B=B, L=L)
        assert at.activations == concrete.activations
        assert at.peak == concrete.peak
        assert at.inference_peak == concrete.inference_peak
        assert at.by_kind == concrete.by_kind
        assert [(r.path, r.activations) for r in at.by_module] == [
            (r.path, r.activations) for r in concrete.by_module]


def test_inference_keeps_nothing_for_backward():
    model, inputs, loss_fn, target = vit_case()
    train = report(model, *inputs, loss_fn=loss_fn, target=target, optimizer="adamw")
    infer = report(model, *inputs, mode="inference")
    assert infer.activations == 0 and infer.grads == 0 and infer.optimizer_state == 0
    assert infer.peak == train.inference_peak
    assert infer.peak < train.peak
    assert train.optimizer_state == 2 * train.params  # AdamW: two fp32 moments


class HalfUsed(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)

    def forward(self, x):
        return self.used(x)


def test_report_names_parameters_the_loss_never_reaches():
    rep = report(HalfUsed(), sf.randn(2, 4), optimizer="adam")
    assert rep.unreached == ["unused.bias", "unused.weight"]
    assert rep.grads == 20 * 4  # only `used` gets gradients
    assert "never reaches 2 parameter(s)" in str(rep)


def test_mixed_precision_counts_16_bit_copies_and_fp32_state():
    model = MLP(16, [32], 4)
    n = sum(p.numel() for p in model.parameters())
    rep = report(model, sf.empty("B", 16, device="meta"), optimizer="adamw",
                 precision="fp16-true")
    assert (rep.params, rep.grads, rep.optimizer_state) == (2 * n, 2 * n, 12 * n)
    sgd = report(model, sf.empty(3, 16, device="meta"), optimizer=sf.optim.SGD,
                 precision="bf16-true")
    assert sgd.optimizer_state == 4 * n  # fp32 master weights only


def test_bad_arguments_raise_memory_plan_errors():
    model = MLP(4, [4], 2)
    x = sf.randn(2, 4)
    for kwargs in ({"mode": "eval"}, {"precision": "int8"}, {"optimizer": "lion"},
                   {"checkpoint": ["nope"]}):
        with pytest.raises(MemoryPlanError):
            report(model, x, **kwargs)
    rep = report(model, x)
    with pytest.raises(MemoryPlanError):
        rep.plan(devices=6, tensor_parallel=4)
    with pytest.raises(MemoryPlanError):
        rep.plan(zero=4)


def test_report_prints_and_plots(tmp_path):
    model, inputs, loss_fn, target = vit_case()
    rep = report(model, *inputs, loss_fn=loss_fn, target=target, optimizer="adamw")
    text = str(rep)
    for word in ("parameters", "gradients", "optimizer state", "activations", "peak",
                 "attention outputs + row logsumexp (flash)", "blocks.0-1"):
        assert word in text
    assert "attention probabilities" not in text  # flash keeps no [T, T] tensor
    math = report(model, *inputs, loss_fn=loss_fn, target=target, attention="math")
    assert "attention probabilities" in str(math)
    assert "attention outputs" not in str(math)
    for suffix in ("png", "svg"):
        path = tmp_path / f"mem.{suffix}"
        rep.plot(path)
        assert path.stat().st_size > 1000
    assert (tmp_path / "mem.svg").read_text().lstrip().startswith("<?xml")


def test_cli_plans_a_gpt(capsys):
    rc = cli_main(["memory", "gpt", "--layers", "2", "--d-model", "64", "--heads", "4",
                   "--seq", "32", "--vocab", "100", "--dtype", "bf16", "--devices", "4",
                   "--zero", "2", "--tensor-parallel", "2", "--sequence-parallel"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "per device: 4 device(s): data parallel 2, tensor parallel 2" in out
    assert "ZeRO stage 2" in out


def test_cli_vit_and_entry_point(capsys):
    assert cli_main(["memory", "vit", "--image-size", "32", "--patch-size", "8", "--layers",
                     "1", "--d-model", "32", "--heads", "2", "--classes", "10"]) == 0
    assert "ViT" in capsys.readouterr().out
    assert cli_main(["memory", "shapeflow.cli.graph:figure2", "--input", "784,B", "--batch",
                     "8"]) == 0
    assert "Figure2" in capsys.readouterr().out
    assert cli_main(["memory", "gpt", "--devices", "3", "--tensor-parallel", "2"]) == 2  # a mistake
    assert "MemoryPlanError" in capsys.readouterr().err


# ---- meta views allocate where NumPy copies ------------------------------------------------
VIEW_CASES = {
    "transpose_reshape": lambda t: t.transpose(0, 1).reshape(-1),
    "split_reshape": lambda t: t[:, :4].reshape(6, 2, 2),
    "permute_contiguous": lambda t: t.permute(1, 0).contiguous(),
    "contiguous_noop": lambda t: t.contiguous(),
    "unsqueeze_transposed": lambda t: t.T.unsqueeze(0),
    "expand_reshape": lambda t: t[:1].expand(6, 8).reshape(48),
    "slice_rows_reshape": lambda t: t[2:4].reshape(16),
}


@pytest.mark.parametrize("name", VIEW_CASES)
def test_meta_views_copy_where_numpy_copies(name):
    fn = VIEW_CASES[name]
    cpu = sf.randn(6, 8)
    m = cpu.to("meta")
    out_cpu, out_meta = fn(cpu), fn(m)
    assert (out_cpu._version is cpu._version) == np.shares_memory(out_cpu.data, cpu.data)
    assert (out_meta._version is m._version) == (out_cpu._version is cpu._version)


def test_resnet_report_shows_batchnorm_inputs_dominate():
    sf.manual_seed(0)
    model, inputs, loss_fn, target = resnet_case()
    rep = report(model, *inputs, loss_fn=loss_fn, target=target)
    assert rep.by_kind[base.LAYER_INPUT] == max(rep.by_kind.values())
    assert 0 < rep.by_kind[base.NORM_STATS] < rep.activations // 100  # [C] mean and invstd
    bn = sum(r.activations for r in rep.by_module if r.kind == "BatchNorm2d")
    # the conv outputs each BatchNorm keeps are nearly all of the layer inputs (a conv's own
    # input is the ReLU output before it, counted once, as that ReLU's)
    assert bn - rep.by_kind[base.NORM_STATS] >= 0.95 * rep.by_kind[base.LAYER_INPUT]
