"""`shapeflow bench serve ...`: benchmark an OpenAI-compatible server as vLLM's `bench serve`
does (TTFT, TPOT, ITL, E2EL, throughput, goodput), or sweep batch size and prompt length and
plot latency against batch, prompt and KV length.

Against a running server (`--base-url`, default http://127.0.0.1:8000), or one it starts
itself (`--serve CHECKPOINT`: `shapeflow serve` on a free loopback port, stopped after).
"""

from __future__ import annotations

import argparse
import json
import math
import os


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `bench` command (with its `serve` subcommand) on an argparse subparsers."""
    b = subparsers.add_parser("bench", help="benchmarks: `bench serve` measures a serving "
                              "endpoint as vLLM's `bench serve` does")
    b.set_defaults(func=run)  # `serve` is the one subcommand (required)
    sub = b.add_subparsers(dest="bench_command", required=True)
    p = sub.add_parser("serve", help="latency and throughput of an OpenAI-compatible server",
                       description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    s = p.add_argument_group("server")
    s.add_argument("--base-url", help="the server's root URL (default: http://HOST:PORT)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--endpoint", default="/v1/completions",
                   help="/v1/completions or /v1/chat/completions")
    s.add_argument("--model", help="the model name to request (default: the first of "
                   "/v1/models)")
    s.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                   help="bearer token (default: $OPENAI_API_KEY)")
    s.add_argument("--serve", metavar="PATH", help="start `shapeflow serve PATH` on a free "
                   "loopback port for the run, and stop it after")
    s.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                   help="an argument for that server, repeatable (e.g. --serve-arg=--no-enable-"
                   "prefix-caching)")
    d = p.add_argument_group("dataset")
    d.add_argument("--dataset-name", default="random", choices=["random", "longtail"])
    d.add_argument("--num-prompts", type=int, default=100)
    d.add_argument("--tokenizer", metavar="PATH", help="a checkpoint or Hugging Face directory "
                   "whose tokenizer sizes the prompts (default: the --serve checkpoint's, else "
                   "ASCII letters and spaces, one token each for a character model)")
    d.add_argument("--random-input-len", type=int, default=128)
    d.add_argument("--random-output-len", type=int, default=128)
    d.add_argument("--random-range-ratio", type=float, default=0.0,
                   help="lengths uniform in [len*(1-r), len*(1+r)]")
    d.add_argument("--random-prefix-len", type=int, default=0,
                   help="tokens of one shared prefix before each prompt")
    d.add_argument("--longtail-sigma", type=float, default=1.0,
                   help="longtail: log-normal spread around the --random-*-len medians")
    a = p.add_argument_group("load")
    a.add_argument("--request-rate", type=float, default=math.inf,
                   help="requests per second (inf: all at once)")
    a.add_argument("--burstiness", type=float, default=1.0,
                   help="Gamma arrivals' shape: 1 Poisson, < 1 burstier, > 1 steadier")
    a.add_argument("--max-concurrency", type=int, help="requests in flight at most")
    a.add_argument("--seed", type=int, default=0)
    r = p.add_argument_group("report")
    r.add_argument("--percentile-metrics", default="ttft,tpot,itl,e2el")
    r.add_argument("--metric-percentiles", default="90,99")
    r.add_argument("--goodput", nargs="+", metavar="NAME:MS",
                   help="SLOs for goodput, e.g. ttft:200 tpot:50 e2el:5000")
    r.add_argument("--save-result", action="store_true")
    r.add_argument("--result-dir", default=".")
    r.add_argument("--result-filename")
    r.add_argument("--disable-tqdm", action="store_true")
    r.add_argument("--sweep", action="store_true", help="concurrency 1,2,4,8 and input lengths "
                   "64..1024 instead of one run")
    r.add_argument("--plot", metavar="PATH.png", help="latency against batch size, prompt length "
                   "and KV length (runs the sweep), with the plan's prediction")
    p.set_defaults(func=run)


def _floats(text: str, option: str) -> list[float]:
    from ..errors import ArgumentError

    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ArgumentError(f"{option} takes numbers separated by commas, got {text!r}",
                            op="bench") from None


def _requests(args, tokenizer):
    from ..serve import bench

    if args.dataset_name == "longtail":
        return bench.longtail_requests(args.num_prompts, args.random_input_len,
                                       args.random_output_len, args.longtail_sigma,
                                       tokenizer=tokenizer, seed=args.seed)
    return bench.random_requests(args.num_prompts, args.random_input_len,
                                 args.random_output_len, args.random_range_ratio,
                                 args.random_prefix_len, tokenizer, args.seed)


def _predictor(model, runs: dict):
    """A calibrated `sf.serve.plan` for the model, or None (with the reason printed)."""
    if model is None:
        print("no plan prediction: give --serve or --tokenizer with the checkpoint")
        return None
    from ..serve.plan import plan

    longest = max(p["input_len"] + p["output_len"] for v in runs.values() for p in v)
    batch = max(b["concurrency"] for b in runs["batch"]) if runs["batch"] else 1
    max_len = min(longest, model.config.block_size)
    for length in (max_len, max(2, max_len // 2)):  # the fit is linear: it extrapolates
        try:
            pl = plan(model, max_batch=batch, max_len=length)
            calibrated = pl.calibrate()
            return calibrated if hasattr(calibrated, "predict_tpot") else pl
        except Exception as err:  # the picture still has the measurements
            print(f"no plan prediction at max_len {length}: {type(err).__name__}: {err}")
    return None


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow bench serve` with parsed arguments; the exit status."""
    from ..errors import ShapeflowError

    for package in ("httpx", "tqdm"):
        try:
            __import__(package)
        except ImportError:
            raise ShapeflowError(f"shapeflow bench serve needs httpx and tqdm ({package} is not "
                                 "installed)", hint="pip install 'shapeflow[serve]'") from None
    try:
        return _run(args)
    except ShapeflowError as err:
        if err.hint is None:
            err.hint = "`shapeflow bench serve --help` lists the options"
        raise


def _run(args: argparse.Namespace) -> int:
    import contextlib

    from ..serve import bench

    metrics = [m.strip() for m in args.percentile_metrics.split(",") if m.strip()]
    percentiles = _floats(args.metric_percentiles, "--metric-percentiles")
    goodput = bench.parse_goodput(args.goodput)
    model = tokenizer = None
    source = args.tokenizer or args.serve
    if source:
        from ..serve.loading import load_served_model  # what `shapeflow serve` loads

        model, tokenizer, _ = load_served_model(source)
    kwargs = dict(endpoint=args.endpoint, model=args.model, request_rate=args.request_rate,
                  burstiness=args.burstiness, percentile_metrics=metrics,
                  percentiles=percentiles, goodput=goodput, disable_tqdm=args.disable_tqdm,
                  api_key=args.api_key)
    server = (bench.launched_server(args.serve, args.serve_arg) if args.serve
              else contextlib.nullcontext(args.base_url or f"http://{args.host}:{args.port}"))
    with server as base_url:
        if args.sweep or args.plot:
            lens = (64, 128, 256, 512, 1024)
            if model is not None:  # prompts that fit the model's context with their output
                lens = tuple(n for n in lens if n + 64 <= model.config.block_size) or (16,)
            runs = bench.sweep(base_url, input_lens=lens, tokenizer=tokenizer, seed=args.seed,
                               **kwargs)
            _print_sweep(runs)
            result: dict = {"sweep": runs}
            if args.plot:
                from ..serve.bench_plot import plot_sweep

                plot_sweep(runs, args.plot, _predictor(model, runs),
                           title=f"{bench.served_model(base_url, args.api_key)} on this machine")
                print(f"saved {args.plot}")
        else:
            requests = _requests(args, tokenizer)
            result = bench.run_benchmark(requests, base_url, max_concurrency=args.max_concurrency,
                                         seed=args.seed, tokenizer=tokenizer, **kwargs)
            print(bench.format_report(result, metrics, percentiles))
    if args.save_result:
        name = args.result_filename or (
            f"shapeflow-bench-{args.dataset_name}-{args.request_rate}qps"
            f"{'-concurrency' + str(args.max_concurrency) if args.max_concurrency else ''}"
            f"-{result.get('date', 'sweep')}.json")
        path = os.path.join(args.result_dir, name)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"saved {path}")
    return 0


def _print_sweep(runs: dict) -> None:
    print(f"{'concurrency':>11} {'input':>6} {'output':>6} {'TTFT p50':>9} {'TPOT p50':>9} "
          f"{'ITL p99':>8} {'tok/s':>8}")
    for kind in ("batch", "prompt"):
        for p in runs[kind]:
            r = p["result"]
            print(f"{p['concurrency']:>11} {p['input_len']:>6} {p['output_len']:>6} "
                  f"{r['median_ttft_ms']:>9.2f} {r['median_tpot_ms']:>9.2f} "
                  f"{r.get('p99_itl_ms', float('nan')):>8.2f} {r['output_throughput']:>8.1f}")
