"""`shapeflow summary MODEL [--input SHAPE] [--dtype DT]`: the shape chain and module table."""

from __future__ import annotations

import argparse
import sys


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `summary` subcommand on an argparse subparsers object."""
    s = subparsers.add_parser("summary",
                              help="the shape chain and per-module table, without data")
    s.add_argument("model", help="mlp, vit, gpt, lstm, or package.module:factory")
    s.add_argument("--input", help='input shape, e.g. "B,3,224,224" (names are symbolic)')
    s.add_argument("--dtype", help="bf16, fp16, fp32 ...")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow summary` with parsed arguments; the exit status."""
    from .. import dtypes
    from ..device import meta
    from ..inspect.summary import summary
    from ..models.registry import build_model, default_input, parse_input

    with meta:  # built there directly: no weights are allocated, even for a factory's model
        model = build_model(args.model, device="meta")
    if args.dtype:
        model = model.to(dtypes.get_dtype(args.dtype))
    spec = args.input or default_input(args.model)
    if spec is None:
        print("--input is needed for a module:factory model", file=sys.stderr)
        return 2
    is_tokens = args.model in ("gpt", "lstm")
    x = parse_input(spec, dtype=dtypes.int64 if is_tokens else (
        dtypes.get_dtype(args.dtype) if args.dtype else None))
    s = summary(model, x)
    print(s.chain())
    print(s)
    return 0
