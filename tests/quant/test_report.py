"""sf.quant.report: per-module own and propagated error against the float model."""

import math

import numpy as np
import pytest

import shapeflow as sf
from shapeflow import nn
from shapeflow.quant.metrics import cosine_similarity, normalized_l2, sqnr
from shapeflow.quant.report import report


def _mlp(seed=0):
    sf.manual_seed(seed)
    return sf.models.MLP(16, [32, 24], 10).eval()


def _outputs(model, x, names):
    got = {}
    hooks = [model.get_submodule(n).register_forward_hook(
        lambda m, a, out, n=n: got.__setitem__(n, out.numpy())) for n in names]
    with sf.no_grad():
        y = model(x)
    for h in hooks:
        h.remove()
    return y.numpy(), got


def test_rows_follow_the_forward_order_and_measure_against_the_float_model():
    model, x = _mlp(), sf.randn(64, 16)
    rep = report(model, x, scheme="int8")
    names = sf.quant.eligible(model, "int8")
    assert [r.name for r in rep.rows] == names
    ref, float_acts = _outputs(model, x, names)
    # propagated: the fully quantized copy, hooked the same way
    q = sf.quant.quantize(model, "int8")
    out, q_acts = _outputs(q, x, names)
    for r in rep.rows:
        assert r.propagated.sqnr == pytest.approx(sqnr(float_acts[r.name], q_acts[r.name]))
        assert r.propagated.normalized_l2 == pytest.approx(
            normalized_l2(float_acts[r.name], q_acts[r.name]))
        assert r.propagated.cosine == pytest.approx(
            cosine_similarity(float_acts[r.name], q_acts[r.name]))
        # own: a copy with only this module quantized, the rest float
        alone = sf.quant.quantize(model, "int8", modules=[r.name])
        _, acts = _outputs(alone, x, [r.name])
        assert r.own.sqnr == pytest.approx(sqnr(float_acts[r.name], acts[r.name]))
        assert 20 < r.own.sqnr < 60
    assert rep.rows[0].own.sqnr == rep.rows[0].propagated.sqnr  # nothing quantized before it
    assert rep.sqnr == pytest.approx(sqnr(ref, out)) == rep.output.propagated.sqnr
    assert rep.rows[-1].propagated.sqnr >= rep.sqnr - 1e-9  # the last layer is the output
    model.train()
    report(model, x, scheme="int8-weight")
    assert model.training  # measured in eval mode, then given back as it was
    assert type(model.get_submodule(names[0])) is nn.Linear  # the model stayed float


def test_ranges_and_outlier_channels():
    model, x = _mlp(), sf.randn(64, 16)
    x.numpy()[:, 3] *= 50  # one loud input feature
    rep = report(model, x, scheme="int8")
    first = rep.rows[0]
    assert first.activation.outlier_channels == [3]
    absmax = np.abs(x.numpy()).max(0)
    assert first.activation.outlier_ratio == pytest.approx(absmax.max() / np.median(absmax))
    assert first.activation.min == pytest.approx(float(x.numpy().min()))
    w = model.get_submodule(first.name).weight.detach().numpy()
    assert first.weight.max == pytest.approx(float(w.max()))
    per_row = np.abs(w).max(1)
    assert first.weight.outlier_ratio == pytest.approx(per_row.max() / np.median(per_row))
    # the loud channel costs the first layer precision: per-token scales follow it
    quiet = report(model, sf.randn(64, 16), scheme="int8")
    assert first.own.sqnr < quiet.rows[0].own.sqnr


def _amplifier():
    """Linear 4 -> 64, then 64 -> 64 with 10x the gain off the 4-dim subspace the first
    one's output (the signal) lies in: the first layer's weight noise, which leaves that
    subspace, grows 10x against the signal. The second weight is integers with 127 the
    largest of each row, so int8 stores it exactly: no error of its own."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((64, 4))
    basis, _ = np.linalg.qr(np.concatenate([w1, rng.standard_normal((64, 60))], axis=1))
    m = (basis * np.r_[np.ones(4), np.full(60, 10.0)]) @ basis.T
    w2 = np.rint(m / np.abs(m).max(1, keepdims=True) * 127)
    model = nn.Sequential(nn.Linear(4, 64, bias=False), nn.Linear(64, 64, bias=False))
    model[0].weight._data[...] = w1.astype(np.float32)
    model[1].weight._data[...] = w2.astype(np.float32)
    return model.eval()


def test_it_names_where_error_is_introduced_and_where_it_is_amplified():
    model = _amplifier()
    rep = report(model, sf.randn(128, 4), scheme="int8-weight")
    first, second = rep.rows
    assert first.amplification_db == 0.0  # its input is the float input
    assert second.amplification_db > 10
    assert rep.amplified() == ["1"]
    assert second.own.sqnr > 100  # stored exactly
    assert second.propagated.sqnr < first.propagated.sqnr - 10
    assert rep.introduced(1) == [min(rep.rows, key=lambda r: r.own.sqnr).name]
    text = str(rep)
    assert "error amplified by: 1 (+" in text and "error introduced most by:" in text


def test_classifier_agreement_and_accuracy():
    model, x = _mlp(), sf.randn(200, 16)
    y = sf.randint(0, 10, (200,))
    rep = report(model, x, scheme="int8-weight", target=y)
    ref, _ = _outputs(model, x, [])
    out, _ = _outputs(sf.quant.quantize(model, "int8-weight"), x, [])
    assert rep.task.top1_agreement == pytest.approx((ref.argmax(1) == out.argmax(1)).mean())
    assert rep.task.accuracy_float == pytest.approx((ref.argmax(1) == y.numpy()).mean())
    assert rep.task.accuracy_quant == pytest.approx((out.argmax(1) == y.numpy()).mean())
    ce = sf.nn.functional.cross_entropy(sf.tensor(ref.astype(np.float32)), y).item()
    assert rep.task.loss_float == pytest.approx(ce, rel=1e-5)


def test_gpt_loss_and_perplexity_change():
    sf.manual_seed(0)
    gpt = sf.models.GPT(vocab_size=40, block_size=16, n_layer=2, n_head=2, n_embd=32).eval()
    idx, tgt = sf.randint(0, 40, (4, 16)), sf.randint(0, 40, (4, 16))
    rep = report(gpt, idx, scheme="int8", target=tgt)
    with sf.no_grad():
        _, loss = gpt(idx, tgt)
        _, qloss = sf.quant.quantize(gpt, "int8")(idx, tgt)
    assert rep.task.loss_float == pytest.approx(loss.item(), rel=1e-5)
    assert rep.task.loss_quant == pytest.approx(qloss.item(), rel=1e-5)
    assert rep.task.perplexity_quant == pytest.approx(math.exp(qloss.item()), rel=1e-5)
    # the loss the model returns is used when it is given the targets itself
    rep2 = report(gpt, idx, tgt, scheme="int8")
    assert rep2.task.loss_float == loss.item()
    names = [r.name for r in rep.rows]
    assert names[0] == "transformer.wte" and names[-1] == "lm_head"
    assert rep.rows[0].input is None and rep.rows[0].activation is None  # token ids
    assert "perplexity" in str(rep)


def test_suggest_keeps_modules_float_until_the_budget_is_met_and_verifies_it():
    model = _amplifier()
    x = sf.randn(128, 4)
    rep = report(model, x, scheme="int8")
    budget = rep.sqnr + 10
    s = rep.suggest(budget_db=budget)
    assert s.met and s.sqnr >= budget and s.keep_float
    rest = [n for n in sf.quant.eligible(model, "int8") if n not in s.keep_float]
    ref, _ = _outputs(model, x, [])
    if rest:
        out, _ = _outputs(sf.quant.quantize(model, "int8", modules=rest), x, [])
        assert s.sqnr == pytest.approx(sqnr(ref, out))
    assert [n for n, _ in s.tried] == s.keep_float
    # a budget already met keeps everything quantized; an infinite one keeps all float
    assert rep.suggest(budget_db=rep.sqnr - 1).keep_float == []
    exact = rep.suggest(budget_db=math.inf)
    assert exact.met and sorted(exact.keep_float) == ["0", "1"] and exact.sqnr == math.inf


def test_table_dict_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    model, x = _mlp(), sf.randn(32, 16)
    rep = report(model, x, scheme="int8")
    text = str(rep)
    for r in rep.rows:
        assert r.name in text
    assert f"output SQNR {rep.sqnr:.1f} dB" in text
    d = rep.to_dict()
    assert d["output_sqnr"] == rep.sqnr and len(d["layers"]) == len(rep.rows)
    assert set(d["layers"][0]) >= {"name", "own", "propagated", "weight", "activation",
                                   "amplification_db"}
    fig = rep.plot(tmp_path / "sqnr.png")
    assert (tmp_path / "sqnr.png").stat().st_size > 0
    lines = fig.axes[0].get_lines()
    assert [list(line.get_ydata()) for line in lines[:2]] == [
        [r.own.sqnr for r in rep.rows], [r.propagated.sqnr for r in rep.rows]]
    from rich.console import Console

    console = Console(record=True, width=160)
    console.print(rep)
    assert rep.rows[0].name in console.export_text()


def test_bad_calls():
    model = _mlp()
    with pytest.raises(sf.ShapeflowError, match="give the model's inputs"):
        report(model, scheme="int8")
    with pytest.raises(sf.ShapeflowError, match="unknown scheme 'int3'"):
        report(model, sf.randn(2, 16), scheme="int3")
    conv = nn.Sequential(nn.Conv2d(1, 2, 3)).eval()
    with pytest.raises(sf.ShapeflowError, match="quantizes no module of Sequential"):
        report(conv, sf.randn(1, 1, 5, 5), scheme="int8")
