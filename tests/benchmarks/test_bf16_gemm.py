"""benchmarks/bf16_gemm.py runs end to end (at toy sizes) and reports every row."""

from benchmarks import bf16_gemm


def test_report_has_every_row(monkeypatch, capsys):
    monkeypatch.setattr(bf16_gemm, "N", 64)
    monkeypatch.setattr(bf16_gemm, "TOKENS", 32)
    monkeypatch.setattr(bf16_gemm, "D_IN", 16)
    monkeypatch.setattr(bf16_gemm, "D_OUT", 24)
    out = bf16_gemm.report(quick=True)
    for name in ("bf16", "fp16", "fp32"):
        row = out["matmul_1024"][name]
        assert row["shapeflow_gflops"] > 0 and row["torch_gflops"] > 0
    assert set(out["linear_gpt"]) == {"fwd", "fwd+bwd"}
    assert out["bf16_over_fp32"] > 0 and "avx512_bf16" in out["cpu"]
    text = capsys.readouterr().out
    assert "bf16 matmul: shapeflow" in text and "bf16 Linear" in text
