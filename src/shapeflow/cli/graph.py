"""`shapeflow graph MODEL --input "B,3,32,32" -o model.svg [--depth 2] [--backward]`.

Traces one call of the model on the meta device (nothing is computed, names in --input are
symbolic) and draws its computation graph: SVG, PNG or PDF through Graphviz `dot`, or the
DOT source for a `.dot` file (or on stdout when no -o is given).
"""

from __future__ import annotations

import argparse
import sys

from .. import factories, nn
from ..ops.activation import relu
from ._inputs import fit_overrides, input_dtype, need_input, run_command, sizes


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `graph` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "graph", help="draw the computation graph (svg/png/pdf via Graphviz, or DOT)",
        description=__doc__.split("\n\n")[1])
    p.add_argument("model", help="mlp, vit, gpt, resnet, lstm, or package.module:factory")
    p.add_argument("--input", help='input shape, e.g. "B,3,32,32" (names are symbolic)')
    p.add_argument("-o", "--output", help="file to write: .svg, .png, .pdf or .dot "
                   "(default: DOT on stdout)")
    p.add_argument("--depth", type=int, default=None,
                   help="collapse each module called at this depth into one node (1: the "
                   "model's children)")
    p.add_argument("--backward", action="store_true", help="add the gradient flow")
    p.add_argument("--dtype", help="input dtype (default float32; int64 token ids for a "
                   "model whose first layer is an embedding: gpt, lstm)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow graph` with parsed arguments; the exit status."""
    from .. import dtypes
    from ..device import meta
    from ..errors import ShapeflowError
    from ..inspect.graph import graph
    from ..models.registry import build_model, default_input, parse_input

    spec = args.input or default_input(args.model)
    if spec is None:
        raise need_input(args.model)
    with meta:  # built there directly: no weights are allocated, even for a factory's
        model = build_model(args.model, device="meta", **fit_overrides(args.model, sizes(spec)))
    # given: as asked; else token ids for a model that embeds them (gpt, lstm), else float32
    dtype = dtypes.get_dtype(args.dtype) if args.dtype else input_dtype(model)
    x = parse_input(spec, dtype=dtype)
    g = graph(model, x, depth=args.depth, backward=args.backward)
    if args.output:
        try:
            g.render(args.output)
        except OSError as err:
            raise ShapeflowError(f"cannot write {args.output}: {err.strerror or err}",
                                 hint="check that its folder exists and is writable") from None
        n_ops = sum(n.kind in ("op", "module") for n in g.nodes)
        print(f"wrote {args.output}: {len(g.nodes)} nodes ({n_ops} ops/modules), "
              f"{sum(e.kind == 'data' for e in g.edges)} edges")
    else:
        sys.stdout.write(g.to_dot())
    return 0


class Figure2(nn.Module):
    """TensorFlow whitepaper Figure 2, `relu(W @ x + b)`: an input, a parameter, a constant."""

    def __init__(self, in_features: int = 784, out_features: int = 100) -> None:
        super().__init__()
        self.W = nn.Parameter(factories.randn(out_features, in_features) * 0.01)
        self.register_buffer("b", factories.zeros(out_features, 1))  # not trained: a constant

    def forward(self, x):
        return relu(self.W @ x + self.b)


def figure2(in_features: int = 784, out_features: int = 100) -> Figure2:
    """The Figure-2 model: `shapeflow graph shapeflow.cli.graph:figure2 --input "784,B"`."""
    return Figure2(in_features, out_features)


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand alone (`python -m shapeflow.cli.graph MODEL ...`)."""
    parser = argparse.ArgumentParser(prog="shapeflow")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["graph", *(sys.argv[1:] if argv is None else argv)])
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
