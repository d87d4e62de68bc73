"""Bytes of quantized models: data + scales (+ zero points), exactly, in nbytes and the
memory report."""

from __future__ import annotations

import pytest

import shapeflow as sf
from shapeflow.quant import QuantizedLinear, quantize

V, BLOCK, L, E = 96, 32, 2, 64


def _gpt():
    sf.manual_seed(0)
    return sf.models.GPT(vocab_size=V, block_size=BLOCK, n_layer=L, n_head=4, n_embd=E)


def _linears():
    """(out, in) of every Linear of the GPT, lm_head (tied to wte) included."""
    per_block = [(3 * E, E), (E, E), (4 * E, E), (E, 4 * E)]
    return per_block * L + [(V, E)]


def test_int8_linear_weights_are_4x_smaller():
    q = quantize(_gpt(), "int8")
    lin = [m for m in q.modules() if isinstance(m, QuantizedLinear)]
    got = sum(m.weight_nbytes() for m in lin)
    want = sum(n * k + 4 * n for n, k in _linears())  # int8 data + one fp32 scale a row
    assert got == want
    fp32 = sum(4 * n * k for n, k in _linears())
    # 8 bits + a 32-bit scale per row of E (in) values: 4E / (E + 4) per layer, 3.76x at E=64
    assert 3.7 < fp32 / got < 4.0
    assert sum(m.weight_q.nbytes for m in lin) == want


@pytest.mark.parametrize("scheme,group", [("int4-g32", 32), ("int4-g128", 128)])
def test_int4_weights_with_scales(scheme, group):
    sf.manual_seed(0)
    m = sf.models.GPT(vocab_size=V, block_size=BLOCK, n_layer=L, n_head=4, n_embd=128)
    q = quantize(m, scheme)
    lin = [x for x in q.modules() if isinstance(x, QuantizedLinear)]
    shapes = [(x.out_features, x.in_features) for x in lin]
    # half a byte a weight + one float16 scale (2 bytes) per group
    want = sum(n * k // 2 + 2 * n * (k // group) for n, k in shapes)
    assert sum(x.weight_nbytes() for x in lin) == want
    assert sum(x.weight_q.nbytes for x in lin) == want
    assert all(x.weight_scale.dtype == sf.float16 for x in lin)
    ratio = sum(4 * n * k for n, k in shapes) / want
    # 4 bits + a 16-bit scale per group, as llama.cpp's Q4_0: 32 / (4 + 16 / group)
    # = 7.11x (g32: 4.5 bits a weight), 7.76x (g128)
    assert ratio == 32 / (4 + 16 / group)
    assert 7.1 < ratio < 7.12 if group == 32 else 7.75 < ratio < 7.77


def test_memory_report_counts_quantized_storage_exactly():
    m = _gpt()
    idx = sf.randint(0, V, (2, 16))
    float_bytes = sf.memory.report(m, idx, mode="inference").params
    assert float_bytes == sum(p.nbytes for p in m.parameters())
    q = quantize(m, "int8")
    rep = sf.memory.report(q, idx, mode="inference")
    # quantized: every Linear and both Embeddings; float: LayerNorms and biases
    data = sum(n * k + 4 * n for n, k in _linears()[:-1])
    data += V * E + 4 * V + BLOCK * E + 4 * BLOCK  # wte (shared with lm_head) and wpe
    biases = L * 4 * (3 * E + E + 4 * E + E)
    norms = (2 * L + 1) * 2 * E * 4
    assert rep.params == data + biases + norms
    assert rep.params == sum(p.nbytes for p in q.parameters()) + sum(
        b.nbytes for b in q.buffers())
    assert float_bytes / rep.params > 3.5



def test_memory_report_counts_int4_g32_float16_scales_exactly():
    m = _gpt()
    idx = sf.randint(0, V, (2, 16))
    q = quantize(m, "int4-g32")
    rep = sf.memory.report(q, idx, mode="inference")
    # half a byte a weight + 2 bytes (float16) per 32 weights: every Linear, wte (shared with
    # lm_head) and wpe; float: LayerNorms and biases
    tables = _linears()[:-1] + [(V, E), (BLOCK, E)]
    data = sum(n * k // 2 + 2 * n * (k // 32) for n, k in tables)
    biases = L * 4 * (3 * E + E + 4 * E + E)
    norms = (2 * L + 1) * 2 * E * 4
    assert rep.params == data + biases + norms
    assert rep.params == sum(p.nbytes for p in q.parameters()) + sum(
        b.nbytes for b in q.buffers())
    fp32 = sum(4 * n * k for n, k in tables)
    assert fp32 / data == 32 / 4.5  # 7.11x on the quantized weights
