"""benchmarks/quant_gemm.py runs its four sides on a small shape and reports rates."""

from benchmarks import quant_gemm


def test_measure_small_shape():
    r = quant_gemm.measure(12, 64, 40, rounds=1, repeat=4)
    assert set(r) == {"sf_int8", "sf_int8_raw", "sf_fp32_sgemm", "torch_dynamic_int8",
                      "torch_fp32"}
    assert all(v["gflops"] > 0 and v["median_s"] > 0 for v in r.values())
