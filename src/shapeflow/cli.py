"""The `shapeflow` command: demo, train, summary, memory, graph."""

from __future__ import annotations

import argparse
import sys


def _demo(args) -> int:
    from .demo import run_demo

    return run_demo(epochs=args.epochs, seed=args.seed, out=args.out)


def _train(args) -> int:
    from .train import train_gpt

    if args.model != "gpt":
        print(f"unknown model {args.model!r}: only 'gpt' can be trained from the CLI",
              file=sys.stderr)
        return 2
    train_gpt(steps=args.steps, batch_size=args.batch_size, block_size=args.block_size,
              n_layer=args.layers, n_embd=args.d_model, n_head=args.heads, lr=args.lr,
              seed=args.seed, sample_tokens=args.sample_tokens)
    return 0


def _summary(args) -> int:
    from . import dtypes
    from .inspect.summary import summary
    from .models.registry import build_model, default_input, parse_input

    model = build_model(args.model, device="meta")
    if args.dtype:
        model = model.to(dtypes.get_dtype(args.dtype))
    spec = args.input or default_input(args.model)
    if spec is None:
        print("--input is needed for a module:factory model", file=sys.stderr)
        return 2
    is_tokens = args.model == "gpt"
    x = parse_input(spec, dtype=dtypes.int64 if is_tokens else (
        dtypes.get_dtype(args.dtype) if args.dtype else None))
    s = summary(model, x)
    print(s.chain())
    print(s)
    return 0


def _version() -> str:
    from . import __version__
    from .backend import buffers, gemm, kernels

    return (f"shapeflow {__version__} (gemm: {gemm.backend()}, compiled kernels: "
            f"{'on' if kernels.available() else 'off'}, buffer cache: "
            f"{'on' if buffers.enabled() else 'off'})")


class _Version(argparse.Action):
    """--version, looked up only when asked (it loads the native libraries)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shapeflow", description=__doc__)
    p.add_argument("--version", action=_Version, nargs=0,
                   help="the version and which native parts of the cpu backend are in use")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="shape chain, train a ViT on digits, memory, checkpoint")
    d.add_argument("--epochs", type=int, default=40)
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--out", default=None, help="where to write the checkpoint")
    d.set_defaults(func=_demo)

    t = sub.add_parser("train", help="train a reference model on bundled data")
    t.add_argument("model", choices=["gpt"])
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--block-size", type=int, default=64)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--d-model", type=int, default=128)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--sample-tokens", type=int, default=200)
    t.set_defaults(func=_train)

    s = sub.add_parser("summary", help="the shape chain and per-module table, without data")
    s.add_argument("model", help="mlp, vit, gpt, or package.module:factory")
    s.add_argument("--input", help='input shape, e.g. "B,3,224,224" (names are symbolic)')
    s.add_argument("--dtype", help="bf16, fp16, fp32 ...")
    s.set_defaults(func=_summary)

    from . import graph_cli, memory_cli  # subcommands that live with their features

    memory_cli.add_parser(sub)
    graph_cli.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
