"""`shapeflow bench serve`: vLLM's metric math, datasets and arrival processes, and a run
against a real `shapeflow serve` on a loopback port."""

import json
import math
import sys

import numpy as np
import pytest
import torch

from shapeflow.errors import ArgumentError
from shapeflow.serve import bench
from shapeflow.serve.bench import RequestFuncOutput

# ---- datasets ---------------------------------------------------------------------------------

def test_random_prompts_have_the_asked_lengths_from_the_alphabet():
    reqs = bench.random_requests(20, 32, 16, seed=3)
    assert [r.prompt_len for r in reqs] == [32] * 20
    assert all(len(r.prompt) == 32 and set(r.prompt) <= set(bench.ALPHABET) for r in reqs)
    assert [r.expected_output_len for r in reqs] == [16] * 20
    assert len({r.prompt for r in reqs}) == 20
    again = bench.random_requests(20, 32, 16, seed=3)
    assert [r.prompt for r in again] == [r.prompt for r in reqs]
    assert bench.random_requests(20, 32, 16, seed=4)[0].prompt != reqs[0].prompt


def test_range_ratio_draws_uniform_lengths_within_the_band():
    reqs = bench.random_requests(2000, 100, 40, range_ratio=0.5, seed=0)
    ins = np.array([r.prompt_len for r in reqs])
    outs = np.array([r.expected_output_len for r in reqs])
    assert ins.min() == 50 and ins.max() == 150  # both ends reached in 2000 draws of 101
    assert outs.min() == 20 and outs.max() == 60
    assert abs(ins.mean() - 100) < 2.5 and abs(ins.std() - math.sqrt((101**2 - 1) / 12)) < 2


def test_a_shared_prefix_comes_before_each_unique_part():
    reqs = bench.random_requests(8, 64, 4, prefix_len=448, seed=1)
    prefix = reqs[0].prompt[:448]
    assert all(r.prompt.startswith(prefix) and r.prompt_len == 512 for r in reqs)
    assert len({r.prompt[448:] for r in reqs}) == 8


def test_lengths_are_counted_with_the_servers_tokenizer():
    from shapeflow.data.datasets import text_corpus
    from shapeflow.serve.tokenizer import CharTokenizer

    tok = CharTokenizer(sorted(set(text_corpus())))
    assert set(bench.ALPHABET) <= set(tok.vocab)  # the default prompts encode on the char GPT
    for r in bench.random_requests(10, 40, 8, range_ratio=0.3, prefix_len=5, tokenizer=tok):
        assert len(tok.encode(r.prompt)) == r.prompt_len


def test_longtail_lengths_are_log_normal_with_a_fixed_seed():
    median, sigma, n = 200, 0.8, 3000
    reqs = bench.longtail_requests(n, median, 50, sigma=sigma, seed=0)
    assert [r.prompt for r in reqs] == [r.prompt for r in bench.longtail_requests(
        n, median, 50, sigma=sigma, seed=0)]
    ins = np.array([r.prompt_len for r in reqs])
    assert ins.min() >= 1 and ins.max() <= 8 * median
    grid = torch.tensor([50.0, 100, 150, 200, 300, 500, 1000])
    cdf = torch.distributions.LogNormal(math.log(median), sigma).cdf(grid + 0.5).numpy()
    ecdf = (ins[:, None] <= grid.numpy()[None]).mean(0)
    assert np.abs(ecdf - cdf).max() < 0.04, (ecdf, cdf)


def test_bad_dataset_settings_are_argument_errors():
    with pytest.raises(ArgumentError, match="range-ratio"):
        bench.random_requests(4, 10, 10, range_ratio=1.0)
    with pytest.raises(ArgumentError, match="num-prompts"):
        bench.random_requests(0, 10, 10)
    with pytest.raises(ArgumentError, match="lengths"):
        bench.random_requests(4, 10, 0)


# ---- arrivals ---------------------------------------------------------------------------------

def _ks_against_gamma(gaps: np.ndarray, shape: float, scale: float) -> float:
    """Kolmogorov-Smirnov distance of the sample to Gamma(shape, scale) (PyTorch's cdf)."""
    x = torch.tensor(np.sort(gaps), dtype=torch.float64)
    cdf = torch.special.gammainc(torch.tensor(shape, dtype=torch.float64), x / scale).numpy()
    n = len(gaps)
    return float(max((np.arange(1, n + 1) / n - cdf).max(), (cdf - np.arange(n) / n).max()))


@pytest.mark.parametrize("rate,burstiness", [(10.0, 1.0), (4.0, 0.25), (50.0, 4.0)])
def test_arrival_gaps_follow_vllms_gamma_process(rate, burstiness):
    t = bench.arrival_times(4001, rate, burstiness, seed=0)
    assert t[0] == 0 and np.all(np.diff(t) >= 0)
    gaps = np.diff(t)
    assert abs(gaps.mean() * rate - 1) < 0.1  # mean gap 1/rate whatever the burstiness
    # shape = burstiness, scale = 1/(rate*burstiness); 1.95/sqrt(n): the 0.1% critical value
    assert _ks_against_gamma(gaps, burstiness, 1 / (rate * burstiness)) < 1.95 / math.sqrt(4000)
    assert np.array_equal(t, bench.arrival_times(4001, rate, burstiness, seed=0))


def test_infinite_rate_sends_everything_at_once_and_bad_rates_are_errors():
    assert np.array_equal(bench.arrival_times(5), np.zeros(5))
    with pytest.raises(ArgumentError, match="request-rate"):
        bench.arrival_times(5, 0.0)
    with pytest.raises(ArgumentError, match="burstiness"):
        bench.arrival_times(5, 1.0, burstiness=0)


# ---- metrics ----------------------------------------------------------------------------------

def _outputs():
    return [RequestFuncOutput("abcd", True, latency=0.2, output_tokens=4, ttft=0.1,
                              itl=[0.02, 0.03, 0.05], prompt_len=10),
            RequestFuncOutput("x", True, latency=0.3, output_tokens=1, ttft=0.3, itl=[],
                              prompt_len=20),
            RequestFuncOutput("", False, error="HTTP 500: boom", prompt_len=30)]


def test_metrics_follow_vllms_definitions():
    r = bench.calculate_metrics(_outputs(), 2.0, percentiles=(50, 90, 99))
    assert r["completed"] == 2 and r["total_input_tokens"] == 30
    assert r["total_output_tokens"] == 5 and r["output_lens"] == [4, 1, 0]
    assert r["request_throughput"] == 1.0 and r["output_throughput"] == 2.5
    assert r["total_token_throughput"] == 17.5
    assert r["mean_ttft_ms"] == pytest.approx(200) and r["median_ttft_ms"] == pytest.approx(200)
    assert r["p99_ttft_ms"] == pytest.approx(298)  # linear between 100 and 300
    # TPOT: (e2e - ttft) / (tokens - 1), only for requests with more than one token
    assert r["mean_tpot_ms"] == pytest.approx(100 / 3) and r["p90_tpot_ms"] == pytest.approx(
        100 / 3)
    assert r["median_itl_ms"] == pytest.approx(30) and r["mean_itl_ms"] == pytest.approx(100 / 3)
    assert r["p50_e2el_ms"] == pytest.approx(250) and r["p90_e2el_ms"] == pytest.approx(290)
    assert r["request_goodput"] is None and r["errors"][2] == "HTTP 500: boom"


def test_goodput_counts_requests_meeting_every_slo():
    out = _outputs()
    assert bench.calculate_metrics(out, 2.0, goodput={"ttft": 200})["request_goodput"] == 0.5
    assert bench.calculate_metrics(out, 2.0, goodput={"ttft": 300})["request_goodput"] == 1.0
    # the first meets ttft but its TPOT is 33.3 ms; the second's TPOT counts as 0
    r = bench.calculate_metrics(out, 2.0, goodput={"ttft": 300, "tpot": 30})
    assert r["request_goodput"] == 0.5
    assert bench.calculate_metrics(out, 2.0, goodput={"e2el": 199})["request_goodput"] == 0.0
    assert bench.parse_goodput(["ttft:200", "tpot:50.5"]) == {"ttft": 200.0, "tpot": 50.5}
    for bad in (["itl:5"], ["ttft"], ["ttft:-1"], ["ttft:fast"]):
        with pytest.raises(ArgumentError, match="goodput"):
            bench.parse_goodput(bad)


def test_result_keys_and_report_are_vllms():
    r = bench.calculate_metrics(_outputs(), 2.0, percentiles=(99,))
    vllm_keys = {"duration", "completed", "total_input_tokens", "total_output_tokens",
                 "request_throughput", "request_goodput", "output_throughput",
                 "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls",
                 "generated_texts", "errors"}
    vllm_keys |= {f"{s}_{m}_ms" for s in ("mean", "median", "std", "p99")
                  for m in ("ttft", "tpot", "itl", "e2el")}
    assert vllm_keys <= set(r)
    json.dumps(r)
    text = bench.format_report(r, percentiles=(99,))
    lines = text.splitlines()
    assert lines[0] == "=" * 12 + " Serving Benchmark Result " + "=" * 12
    assert lines[1].startswith("Successful requests:" + " " * 21 + "2")
    for label in ("Benchmark duration (s):", "Total generated tokens:",
                  "Request throughput (req/s):", "Output token throughput (tok/s):",
                  "Total Token throughput (tok/s):", "Mean TTFT (ms):", "Median TPOT (ms):",
                  "P99 ITL (ms):", "P99 E2EL (ms):"):
        assert any(line.startswith(label) for line in lines), label
    assert "-----Time per Output Token (excl. 1st token)------" in lines


def test_plot_draws_the_three_panels(tmp_path):
    pytest.importorskip("matplotlib")
    from shapeflow.serve.bench_plot import plot_sweep, sweep_points

    def res(ttft, tpot, itls, lens):
        return {"median_ttft_ms": ttft, "median_tpot_ms": tpot, "median_itl_ms": tpot,
                "input_lens": lens, "itls": itls, "errors": [""] * len(lens)}

    runs = {"batch": [{"concurrency": c, "input_len": 16, "output_len": 4,
                       "result": res(5.0, 1.0 + c, [], [])} for c in (1, 2, 4)],
            "prompt": [{"concurrency": 1, "input_len": n, "output_len": 4,
                        "result": res(n / 10, 1.0, [[0.001, 0.001, 0.007]], [n])}
                       for n in (64, 128)]}
    pts = sweep_points(runs, bin_tokens=1000)
    assert pts["batch"][2][:2] == (4, 5.0) and pts["prompt"] == [(64, 6.4), (128, 12.8)]
    # kv 65..67 and 129..131: one bin; the mean gap (a burst's near-zero gaps and its long
    # one average to the time per token), not the median
    assert pts["kv"] == [(98.0, pytest.approx(3.0))]
    assert sweep_points(runs, bin_tokens=100)["kv"] == [(66.0, pytest.approx(3.0)),
                                                        (130.0, pytest.approx(3.0))]

    class Plan:
        def predict_tpot(self, batch, kv_len):
            return 0.001 * batch

        def predict_ttft(self, prompt_len):
            return 1e-4 * prompt_len

    fig = plot_sweep(runs, str(tmp_path / "sweep.png"), Plan())
    assert (tmp_path / "sweep.png").stat().st_size > 10_000
    axes = fig.get_axes()
    assert [len(ax.get_lines()) for ax in axes] == [2, 2, 2]
    assert list(axes[0].get_lines()[1].get_ydata()) == [1.0, 2.0, 4.0]  # predictions in ms


# ---- against the real server ------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    pytest.importorskip("shapeflow.serve.server")
    pytest.importorskip("shapeflow.cli.serve")
    import shapeflow as sf
    from shapeflow.cli.train import write_checkpoint
    from shapeflow.data.datasets import text_corpus
    from shapeflow.models import GPT

    vocab = "".join(sorted(set(text_corpus())))
    config = dict(vocab_size=len(vocab), block_size=128, n_layer=1, n_head=2, n_embd=32,
                  dropout=0.0)
    sf.manual_seed(0)
    path = str(tmp_path_factory.mktemp("bench") / "tiny.safetensors")
    write_checkpoint({"model": GPT(**config).state_dict(), "config": config, "vocab": vocab},
                     path)
    return path


@pytest.fixture(scope="module")
def server(checkpoint):
    with bench.launched_server(checkpoint, timeout=120) as url:
        yield url


def _ordered(r: dict) -> None:
    for m in bench.METRICS:
        p50, p90, p99 = r[f"p50_{m}_ms"], r[f"p90_{m}_ms"], r[f"p99_{m}_ms"]
        assert r[f"mean_{m}_ms"] > 0 and 0 < p50 <= p90 <= p99, (m, p50, p90, p99)
        assert p50 == pytest.approx(r[f"median_{m}_ms"])


def test_bench_serve_starts_shapeflow_serve_and_measures_it(checkpoint, tmp_path, capsys):
    from shapeflow.cli import main

    assert main(["bench", "serve", "--serve", checkpoint,
                 "--num-prompts", "8", "--random-input-len", "16", "--random-output-len", "8",
                 "--random-range-ratio", "0.25", "--max-concurrency", "4", "--request-rate",
                 "50", "--metric-percentiles", "50,90,99", "--goodput", "e2el:60000",
                 "--disable-tqdm", "--save-result", "--result-dir", str(tmp_path),
                 "--result-filename", "r.json"]) == 0
    out = capsys.readouterr().out
    assert "Serving Benchmark Result" in out and "Successful requests:" + " " * 21 + "8" in out
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["completed"] == 8 and r["errors"] == [""] * 8 and r["max_concurrency"] == 4
    want = bench.random_requests(8, 16, 8, range_ratio=0.25, seed=0)
    assert r["input_lens"] == [q.prompt_len for q in want]  # the server's own count
    assert r["output_lens"] == [q.expected_output_len for q in want]  # ignore_eos: exact
    assert r["total_output_tokens"] == sum(q.expected_output_len for q in want)
    assert all(len(t) == n for t, n in zip(r["generated_texts"], r["output_lens"]))
    assert all(t > 0 for t in r["ttfts"]) and all(g > 0 for itl in r["itls"] for g in itl)
    assert [len(itl) for itl in r["itls"]] == [n - 1 for n in r["output_lens"]]
    assert r["request_goodput"] == pytest.approx(r["request_throughput"])
    _ordered(r)
    assert min(r["start_times"]) >= 0 and max(r["start_times"]) > 0  # rate 50: spread out


def test_sweep_and_plot_against_the_server(server, tmp_path):
    pytest.importorskip("matplotlib")
    from shapeflow.serve.bench_plot import plot_sweep

    runs = bench.sweep(server, concurrencies=(1, 2), input_lens=(8, 40), batch_input_len=8,
                       output_len=6, prompts_per_point=2, disable_tqdm=True,
                       percentiles=(50, 90, 99))
    assert [b["concurrency"] for b in runs["batch"]] == [1, 2]
    assert [p["result"]["completed"] for p in runs["prompt"]] == [2, 2]
    assert runs["prompt"][1]["result"]["input_lens"] == [40, 40]
    fig = plot_sweep(runs, str(tmp_path / "s.png"))
    assert (tmp_path / "s.png").exists() and len(fig.get_axes()[2].get_lines()) == 1


@pytest.mark.parametrize("package", ["tqdm", "httpx"])
def test_bench_without_the_extra_names_it(package, monkeypatch, capsys):
    from shapeflow.cli import main

    monkeypatch.setitem(sys.modules, package, None)  # import -> ImportError
    assert main(["bench", "serve", "--num-prompts", "1"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'shapeflow[serve]'" in err and package in err
