"""What a reader sees: one count of saved bytes everywhere, tables that fit 80 columns,
bytes never written `B` (the batch dim), and tables in notebooks."""

import io
import re

import pytest

import shapeflow as sf
from shapeflow.inspect.memory.tracker import Max
from shapeflow.inspect.units import bytes_cell, format_bytes


def _vit():
    return sf.models.ViT(image_size=32, patch_size=4, in_channels=3, num_classes=10, dim=64,
                         depth=2, heads=4)


def _cases():
    """(name, model, make_inputs(batch)): an MLP, a ViT and a GPT."""
    def gpt_inputs(b):
        idx = sf.empty(b, 32, dtype=sf.int64, device="meta")
        return idx, idx

    return [("mlp", sf.models.MLP(784, [256, 256], 10),
             lambda b: (sf.empty(b, 784, device="meta"),)),
            ("vit", _vit(), lambda b: (sf.empty(b, 3, 32, 32, device="meta"),)),
            ("gpt", sf.models.GPT(97, 32, 2, 4, 64), gpt_inputs)]


@pytest.mark.parametrize("name,model,make", _cases(), ids=lambda c: c if type(c) is str else "")
def test_summary_report_and_graph_count_the_same_saved_bytes(name, model, make):
    """The storage a saved tensor keeps alive (a view keeps its base), counted once."""
    inputs = make("B")
    saved = sf.summary(model, *inputs).total_saved_bytes
    assert saved == sf.memory.report(model, *inputs).activations
    assert saved == sf.graph(model, *inputs).saved_bytes
    at3 = make(3)
    assert saved.subs(B=3) == sf.summary(model, *at3).total_saved_bytes == (
        sf.memory.report(model, *at3).activations) > 0


def test_a_view_saved_for_backward_counts_its_whole_base():
    """x[:, :1] saved by a mul keeps all of x alive: summary says so, as the report does."""
    class Head(sf.nn.Module):
        def forward(self, x):
            return (x[:, :1] * x[:, :1]).sum()

    x = sf.randn(4, 100, requires_grad=True)
    assert sf.summary(Head(), x).total_saved_bytes == 4 * 100 * 4
    assert sf.memory.report(Head(), x).activations == 4 * 100 * 4


def test_bytes_are_never_written_B():
    B, L = sf.Dim("B"), sf.Dim("L")
    assert format_bytes(512) == "512 bytes"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(715848 * B) == "699.1 KiB × B"
    assert format_bytes(400 * B) == "400 bytes × B"
    assert format_bytes(777576 * B + 501336) == "759.4 KiB × B + 489.6 KiB"
    assert format_bytes(3 * B * L + 7 * B) == "3 bytes × B*L + 7 bytes × B"
    peak = Max([777576 * B + 501336, 729216 * B + 585048])
    assert format_bytes(peak) == "max(759.4 KiB × B + 489.6 KiB, 712.1 KiB × B + 571.3 KiB)"
    assert bytes_cell(peak) == "max(759.4 KiB × B\n+ 489.6 KiB,\n712.1 KiB × B\n+ 571.3 KiB)"
    many = bytes_cell(Max([B * k for k in range(1, 7)]))
    assert many.endswith("… 4 more)") and many.count("\n") == 2
    rep = sf.memory.report(_vit(), sf.empty("B", 3, 32, 32, device="meta"), optimizer="adamw")
    for line in str(rep).splitlines():
        assert not re.search(r"\d B\b|\) B\b", line), line


def _reports():
    x = sf.empty("B", 3, 32, 32, device="meta")
    rep = sf.memory.report(_vit(), x, optimizer="adamw")
    gpt = sf.models.GPT(50304, 1024, 2, 12, 768, device="meta")
    idx = sf.empty("B", "L", dtype=sf.int64, device="meta")
    big = sf.memory.report(gpt, idx, idx, precision="bf16-true", recompute="selective",
                           optimizer="adamw", checkpoint=True)
    return [sf.summary(_vit(), x), sf.summary(gpt, idx), rep, rep.subs(B=64), big,
            big.subs(B=8, L=1024).plan(devices=8, zero=3, tensor_parallel=2,
                                       sequence_parallel=True)]


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_every_table_fits_80_columns(monkeypatch):
    from rich.console import Console

    shown = _reports()
    monkeypatch.setenv("COLUMNS", "80")
    for obj in shown:
        text = str(obj)
        assert _widest(text) <= 80, text
        buf = io.StringIO()
        Console(file=buf, width=80).print(obj)  # rich fits them to its console
        assert _widest(buf.getvalue()) <= 80, buf.getvalue()
    monkeypatch.setenv("COLUMNS", "200")
    assert _widest(str(shown[1])) > 80  # a wide terminal gets the wide table


def test_numbers_and_names_stay_whole_when_cells_wrap(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    s = sf.summary(_vit(), sf.empty("B", 3, 32, 32, device="meta"))
    text = str(s)
    assert "569.1 KiB × B" in text and "blocks.0" in text and "patchify" in text
    assert "…" not in text


def test_notebooks_show_html_tables():
    s, _, rep, _, _, plan = _reports()
    html = s._repr_html_()
    assert html.count("<table>") == 1 and "<pre>image:" in html
    assert "patchify" in html and "569.1 KiB × B" in html
    assert html.count("<tr>") == len(s.rows) + 1
    html = rep._repr_html_()
    assert html.count("<table>") == 4 and "activations by kind" in html
    assert "569.1 KiB × B" in html and "ViT, training step: fp32, optimizer adamw" in html
    assert "<table>" in plan._repr_html_() and "ZeRO stage 3" in plan._repr_html_()
