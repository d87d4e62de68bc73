"""`shapeflow summary MODEL [--input SHAPE] [--dtype DT]`: the shape chain and module table."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `summary` subcommand on an argparse subparsers object."""
    s = subparsers.add_parser("summary",
                              help="the shape chain and per-module table, without data")
    s.add_argument("model", help="mlp, vit, gpt, resnet, lstm, or package.module:factory")
    s.add_argument("--input", help='input shape, e.g. "B,3,32,32" (names are symbolic; a '
                   "reference ViT or MLP is built for the image size or features given)")
    s.add_argument("--dtype", help="bf16, fp16, fp32 ...")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow summary` with parsed arguments; the exit status."""
    from .. import dtypes
    from ..device import meta
    from ..inspect.summary import summary
    from ..models.registry import build_model, default_input, parse_input
    from ._inputs import fit_overrides, input_dtype, need_input, sizes

    spec = args.input or default_input(args.model)
    if spec is None:
        raise need_input(args.model)
    dtype = dtypes.get_dtype(args.dtype) if args.dtype else None
    with meta:  # built there directly: no weights are allocated, even for a factory's model
        model = build_model(args.model, device="meta", **fit_overrides(args.model, sizes(spec)))
    if dtype is not None:
        model = model.to(dtype)
    x = parse_input(spec, dtype=input_dtype(model, dtype))
    s = summary(model, x)
    print(s.chain())
    print(s)
    return 0
