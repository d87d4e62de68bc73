"""`shapeflow serve PATH`: an OpenAI-compatible HTTP server (the `serve` extra: uvicorn and
starlette) for a checkpoint of `shapeflow train gpt --save` or a Hugging Face GPT-2 folder."""

from __future__ import annotations

import argparse
import os


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `serve` subcommand on an argparse subparsers object."""
    s = subparsers.add_parser("serve", help="an OpenAI-compatible server (/v1/completions, "
                              "/v1/chat/completions) with continuous batching and a paged "
                              "KV cache")
    s.add_argument("path", help="a checkpoint written by `shapeflow train gpt --save`, or a "
                   "Hugging Face GPT-2 directory (config.json, model.safetensors, tokenizer)")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    s.add_argument("--api-key", default=os.environ.get("SHAPEFLOW_API_KEY"),
                   help="require `Authorization: Bearer KEY` on /v1 (default: "
                   "$SHAPEFLOW_API_KEY, else none)")
    s.add_argument("--model-name", help="the model name clients ask for (default: from PATH)")
    s.add_argument("--max-queue", type=int, default=256,
                   help="requests that may wait beyond the running batch; more get 429 "
                   "(default 256)")
    s.add_argument("--block-size", type=int, default=16, help="tokens per KV block (default 16)")
    s.add_argument("--max-num-seqs", type=int, default=64,
                   help="sequences in the running batch at most (default 64)")
    s.add_argument("--max-num-batched-tokens", type=int, default=512,
                   help="tokens one engine step runs at most (default 512)")
    s.add_argument("--kv-dtype", help="KV-cache storage: int8, fp8-e4m3, fp8-e5m2 (default: "
                   "the model's dtype)")
    s.add_argument("--no-prefix-caching", action="store_true",
                   help="do not reuse the KV blocks of shared prompt prefixes")
    s.add_argument("--no-chunked-prefill", action="store_true",
                   help="prefill each prompt in one step, however long")
    s.add_argument("--max-prefill-tokens-per-step", type=int, default=None,
                   help="prompt tokens a step that runs decodes adds at most (default: sized "
                   "from measured step times, see --prefill-latency-budget)")
    s.add_argument("--prefill-latency-budget", type=float, default=0.5,
                   help="time a prefill chunk may add to a decode step, as a fraction of "
                   "that step's (default 0.5)")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="uvicorn's log level (default info)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow serve` with parsed arguments until interrupted; the exit status."""
    from ..errors import ShapeflowError
    from ._inputs import check_positive

    check_positive(port=args.port, block_size=args.block_size, max_num_seqs=args.max_num_seqs,
                   max_num_batched_tokens=args.max_num_batched_tokens,
                   max_prefill_tokens_per_step=args.max_prefill_tokens_per_step)
    if not args.prefill_latency_budget > 0:
        raise ShapeflowError(f"--prefill-latency-budget must be above 0, got "
                             f"{args.prefill_latency_budget}")
    if args.max_queue < 0:
        raise ShapeflowError(f"--max-queue must be at least 0, got {args.max_queue}")
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        raise ShapeflowError(f"shapeflow serve needs uvicorn and starlette ({err.name} is not "
                             "installed)", hint="pip install 'shapeflow[serve]'") from None
    from ..serve.engine import Engine
    from ..serve.loading import load_served_model
    from ..serve.server import serve

    model, tokenizer, name = load_served_model(args.path)
    engine = Engine(model, tokenizer, block_size=args.block_size,
                    max_num_seqs=args.max_num_seqs,
                    max_num_batched_tokens=args.max_num_batched_tokens,
                    enable_prefix_caching=not args.no_prefix_caching,
                    enable_chunked_prefill=not args.no_chunked_prefill, kv_dtype=args.kv_dtype,
                    max_prefill_tokens_per_step=args.max_prefill_tokens_per_step,
                    prefill_latency_budget=args.prefill_latency_budget)
    name = args.model_name or name
    print(f"serving {name} (context {engine.max_model_len} tokens) on "
          f"http://{args.host}:{args.port}/v1" + (" (API key required)" if args.api_key else ""),
          flush=True)
    serve(engine, host=args.host, port=args.port, api_key=args.api_key, model_name=name,
          max_requests=args.max_num_seqs + args.max_queue, log_level=args.log_level)
    return 0
