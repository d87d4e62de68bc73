"""`shapeflow quant MODEL --scheme S [--checkpoint FILE] [--budget-db X]`: where quantizing a
trained model loses accuracy, module by module."""

from __future__ import annotations

import argparse

MODELS = ("vit", "mlp", "gpt")
# left out, in this order, where the table would not fit the terminal whole
NARROW_DROP = ("in max/med", "input range", "w max/med", "|w| max", "norm. L2", "cos", "#",
               "amplif. dB")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `quant` subcommand on an argparse subparsers object."""
    q = subparsers.add_parser("quant", help="quantize a trained model and report, per module, "
                              "where the error comes from")
    q.add_argument("model", help="vit (the demo's, on digits), mlp (on digits) or gpt (the "
                   "character GPT of `shapeflow train gpt`)")
    q.add_argument("--scheme", default="int8",
                   help="int8, int8-weight, int4-g32, int4-g128 or fp8-e4m3 (default int8)")
    q.add_argument("--checkpoint", metavar="FILE",
                   help="trained weights: `shapeflow demo --out FILE` (vit), `shapeflow train "
                   "gpt --save FILE` (gpt), or any saved state dict of the model")
    q.add_argument("--budget-db", type=float, metavar="X",
                   help="also propose which modules to keep float so the output SQNR is >= X dB")
    q.add_argument("--epochs", type=int, default=20,
                   help="without --checkpoint: epochs to train the vit or mlp here (default 20)")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--plot", metavar="PATH", help="save SQNR through depth as an image")
    q.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow quant` with parsed arguments; the exit status."""
    from rich.console import Console
    from rich.table import Table

    from ..errors import ShapeflowError
    from ..inspect.render import Fitted
    from ..quant import get_scheme
    from ..quant.report import report
    from ..quant.report_view import _width, renderables
    from ._inputs import check_positive
    from ._quant_models import digits_subject, gpt_subject

    if args.model not in MODELS:
        raise ShapeflowError(f"quant: unknown model {args.model!r}",
                             hint=f"use one of {', '.join(MODELS)}")
    check_positive(epochs=args.epochs)
    get_scheme(args.scheme)  # an unknown scheme is said before any training
    console = Console(highlight=False, width=_width())
    if args.model == "gpt":
        subject = gpt_subject(args.checkpoint, args.seed)
    else:
        subject = digits_subject(args.model, args.checkpoint, args.epochs, args.seed)
    console.print(subject.origin)
    rep = report(subject.model, *subject.inputs, scheme=args.scheme,
                 calibration=subject.calibration, target=subject.target)
    for part in renderables(rep):  # the table fitted to the terminal: no number cut
        console.print(Fitted(part, NARROW_DROP) if isinstance(part, Table) else part,
                      crop=False)
    if args.budget_db is not None:
        s = rep.suggest(budget_db=args.budget_db)
        kept = ", ".join(s.keep_float) if s.keep_float else "nothing"
        verdict = "meets" if s.met else "does NOT meet"
        console.print(f"to reach {s.budget_db:g} dB keep float: {kept}; output SQNR "
                      f"{s.sqnr:.1f} dB (verified by a re-run), which {verdict} the budget")
    if args.plot:
        rep.plot(args.plot)
        console.print(f"saved {args.plot}")
    return 0
