"""Issue 34's serving targets, measured by the `shapeflow bench serve` client against
`shapeflow serve` on loopback (one thread in the server, as the other benchmarks run).

    python benchmarks/serve_targets.py [--only a,b,c,d] [--models char,gpt2] [--quick]
                                       [--json PATH]

(a) random 128 in / 128 out: output tok/s at concurrency 8 over concurrency 1 (>= 4x on the
    char GPT, >= 2x on a GPT-2-small-sized model); (b) 448 shared + 64 unique prompt tokens:
    TTFT p50 without prefix caching over with (>= 5x), and the hit rate; (c) a 2,048-token
    prompt arriving during 8 running decodes: the decodes' p99 ITL over their median, with
    chunked prefill (<= 2x) and without, through the server and in-process; (d) the share
    of wall time outside the model at concurrency 8 (<= 20%, the engine's span timing from
    /metrics).
Both models have random weights: the char GPT is `shapeflow train gpt`'s shape (2 layers,
d 128, 4 heads, the corpus's 76 characters) with a 4,096-token context; the GPT-2-small one
has 12 layers, d 768, 12 heads and a 50,257-character vocabulary (one token per character).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # the servers inherit it

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

from shapeflow.serve import bench  # noqa: E402

MODEL_TAG = "shapeflow_engine_model_seconds_total"
SCHEDULE_TAG = "shapeflow_engine_schedule_seconds_total"


def write_model(path: str, kind: str) -> str:
    """A random-weight checkpoint in `shapeflow train gpt`'s format: 'char' or 'gpt2'."""
    import shapeflow as sf
    from shapeflow.cli.train import write_checkpoint
    from shapeflow.data.datasets import text_corpus
    from shapeflow.models import GPT

    if kind == "char":
        vocab = "".join(sorted(set(text_corpus())))
        config = dict(vocab_size=len(vocab), block_size=4096, n_layer=2, n_head=4, n_embd=128)
    else:  # one character per token: 50,257 of them, the ASCII letters among the first
        vocab = "".join(chr(32 + i) for i in range(50257))
        config = dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
    config["dropout"] = 0.0
    sf.manual_seed(0)
    write_checkpoint({"model": GPT(**config).state_dict(), "config": config, "vocab": vocab},
                     path)
    return path


def _run(url: str, reqs, **kw) -> dict:
    return bench.run_benchmark(reqs, url, disable_tqdm=True, percentiles=(50, 90, 99), **kw)


def target_a(path: str, name: str, goal: float, quick: bool) -> dict:
    """Output tok/s at concurrency 8 over concurrency 1, random 128 in / 128 out; rounds
    alternate 1 and 8 (A B A B: a shared machine's load drifts) and the medians count."""
    n1, n8, rounds = (2, 8, 1) if quick else (4, 16, 3)
    tps = {1: [], 8: []}
    tpot = {1: [], 8: []}
    with bench.launched_server(path) as url:
        for i in range(rounds):
            for c, n in ((1, n1), (8, n8)):
                r = _run(url, bench.random_requests(n, 128, 128, seed=10 * i + c),
                         max_concurrency=c, initial_test=i == 0)
                tps[c].append(r["output_throughput"])
                tpot[c].append(r["median_tpot_ms"])
    one, eight = float(np.median(tps[1])), float(np.median(tps[8]))
    ratio = eight / one
    return row(f"(a) {name}: output tok/s, concurrency 8 / 1 (random 128/128)", ratio,
               f">= {goal:g}x", ratio >= goal,
               f"{eight:.1f} vs {one:.1f} tok/s (medians of {rounds}); TPOT p50 "
               f"{np.median(tpot[8]):.2f} vs {np.median(tpot[1]):.2f} ms; per round "
               f"{', '.join(f'{b / a:.2f}x' for a, b in zip(tps[1], tps[8]))}")


def target_b(path: str, name: str, quick: bool) -> dict:
    """TTFT p50 of 448 shared + 64 unique prompt tokens, prefix caching off over on."""
    n = 8 if quick else 16
    reqs = bench.random_requests(n, 64, 16, prefix_len=448, seed=2)
    p50, hit = {}, {}
    for caching, args in ((True, []), (False, ["--no-prefix-caching"])):
        with bench.launched_server(path, args) as url:
            before = bench.server_metrics(url)
            r = _run(url, reqs, max_concurrency=1)
            after = bench.server_metrics(url)
        q = after["shapeflow_prefix_cache_queries_total"] - before.get(
            "shapeflow_prefix_cache_queries_total", 0)
        h = after["shapeflow_prefix_cache_hits_total"] - before.get(
            "shapeflow_prefix_cache_hits_total", 0)
        p50[caching], hit[caching] = r["median_ttft_ms"], h / q if q else 0.0
    ratio = p50[False] / p50[True]
    return row(f"(b) {name}: TTFT p50 without / with prefix caching (448 shared + 64)", ratio,
               ">= 5x", ratio >= 5,
               f"{p50[False]:.2f} vs {p50[True]:.2f} ms; hit rate {100 * hit[True]:.1f}% of "
               f"prompt tokens (off: {100 * hit[False]:.1f}%)")


def target_c(path: str, quick: bool) -> list[dict]:
    """p99 / median ITL of 8 running decodes while a 2,048-token prompt arrives."""
    out_len = 128 if quick else 256
    decodes = bench.random_requests(8, 32, out_len, seed=3)
    long = bench.random_requests(1, 2048, 16, seed=4)
    rows = []
    for chunked, args in ((True, []), (False, ["--no-chunked-prefill"])):
        with bench.launched_server(path, args) as url:
            # how long one decode step takes here, so the prompt lands mid-run
            probe = _run(url, decodes, max_concurrency=8)
            at = 0.25 * probe["median_e2el_ms"] / 1000
            r = _run(url, decodes + long, arrivals=[0.0] * 8 + [at], initial_test=False)
        gaps = sorted(g * 1000 for itl in r["itls"][:8] for g in itl)
        med = gaps[len(gaps) // 2]
        p99 = float(np.percentile(gaps, 99))
        ratio = p99 / med
        label = "with" if chunked else "without"
        rows.append(row(f"(c) char GPT: decodes' p99 / median ITL, 2,048-token prompt arriving, "
                        f"{label} chunked prefill", ratio, "<= 2x" if chunked else "(report)",
                        ratio <= 2 if chunked else None,
                        f"p99 {p99:.2f} ms, median {med:.2f} ms, mean {np.mean(gaps):.2f} "
                        f"ms, max {gaps[-1]:.2f} ms; the "
                        f"long prompt's TTFT {1000 * r['ttfts'][8]:.0f} ms, arriving at "
                        f"{1000 * at:.0f} ms"))
    return rows


def target_c_engine(quick: bool) -> list[dict]:
    """(c) without HTTP: the Engine driven in-process, each decode's gap between steps that
    gave it a token (a loaded machine's client and server threads blur the loopback one).
    Rows: the default latency-aware prefill, a fixed 512-token chunk, no chunking."""
    import time

    import shapeflow as sf
    from shapeflow.models import GPT
    from shapeflow.serve import Engine, SamplingParams

    sf.manual_seed(0)
    model = GPT(vocab_size=76, block_size=4096, n_layer=2, n_head=4, n_embd=128,
                dropout=0.0).eval()
    out_len = 128 if quick else 256
    rows = []
    for label, kw in (("latency-aware chunks (default)", {}),
                      ("fixed 512-token chunks", dict(max_prefill_tokens_per_step=512)),
                      ("no chunking", dict(enable_chunked_prefill=False))):
        eng = Engine(model, **kw)
        rng = np.random.default_rng(3)
        params = SamplingParams(temperature=0.0, max_tokens=out_len, ignore_eos=True)
        ids = {eng.add_request(rng.integers(0, 76, 32).tolist(), params) for _ in range(8)}
        last, gaps, step, ttft, t_long = {}, [], 0, None, 0.0
        while eng.has_unfinished():
            if step == 30:  # the decodes are running
                t_long = time.perf_counter()
                eng.add_request(rng.integers(0, 76, 2048).tolist(),
                                SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True))
            outs = eng.step()
            now = time.perf_counter()
            step += 1
            for o in outs:
                if o.request_id in ids:
                    if o.request_id in last:
                        gaps.append(1000 * (now - last[o.request_id]))
                    last[o.request_id] = now
                elif ttft is None:
                    ttft = now - t_long
        med, p99 = float(np.median(gaps)), float(np.percentile(gaps, 99))
        default = not kw
        rows.append(row(f"(c, engine) char GPT: decodes' p99 / median ITL, 2,048-token prompt "
                        f"arriving, {label}", p99 / med, "<= 2x" if default else "(report)",
                        p99 / med <= 2 if default else None,
                        f"p99 {p99:.2f} ms, median {med:.2f} ms, max {max(gaps):.2f} ms; the "
                        f"long prompt's TTFT {1000 * ttft:.0f} ms"))
    return rows


def target_d(path: str, quick: bool) -> dict:
    """The share of wall time outside the model's forward at concurrency 8."""
    n = 8 if quick else 16
    with bench.launched_server(path) as url:
        reqs = bench.random_requests(n, 128, 128, seed=5)
        _run(url, reqs[:1], max_concurrency=1)  # warm
        before = bench.server_metrics(url)
        r = _run(url, reqs, max_concurrency=8, initial_test=False)
        after = bench.server_metrics(url)
    model = after[MODEL_TAG] - before[MODEL_TAG]
    sched = after[SCHEDULE_TAG] - before[SCHEDULE_TAG]
    share = 1 - model / r["duration"]
    return row("(d) char GPT: wall time outside the model, concurrency 8 (random 128/128)",
               100 * share, "<= 20%", share <= 0.2,
               f"model {model:.2f} s of {r['duration']:.2f} s, scheduler {sched:.3f} s; the "
               f"rest: server, sampling, outputs, client", unit="%")


def row(label: str, value: float, target: str, ok: bool | None, detail: str,
        unit: str = "x") -> dict:
    verdict = {True: "met", False: "MISSED", None: ""}[ok]
    print(f"{label}: {value:.2f}{unit}  (target {target}) {verdict}\n    {detail}", flush=True)
    return {"label": label, "value": value, "target": target, "met": ok, "detail": detail}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="a,b,c,d")
    ap.add_argument("--models", default="char,gpt2", help="the models for (a) and (b)")
    ap.add_argument("--quick", action="store_true", help="fewer requests per point")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    only, models = set(args.only.split(",")), args.models.split(",")
    names = {"char": "char GPT", "gpt2": "GPT-2-small size"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {m: write_model(os.path.join(tmp, f"{m}.safetensors"), m)
                 for m in {"char", *(models if only & {"a", "b"} else [])}}
        for m in models:
            if "a" in only:
                rows.append(target_a(paths[m], names[m], 4.0 if m == "char" else 2.0,
                                     args.quick))
            if "b" in only:
                rows.append(target_b(paths[m], names[m], args.quick))
        if "c" in only:
            rows += target_c(paths["char"], args.quick)
            rows += target_c_engine(args.quick)
        if "d" in only:
            rows.append(target_d(paths["char"], args.quick))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
