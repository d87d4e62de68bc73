"""`shapeflow ops [--family F]`: the census of primitives.

Every op class, by family: its name, whether it has a gradient, what backward keeps (its
`saved` declaration) and which kernel-table entries it calls, read from the code.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `ops` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("ops", help="list every primitive: family, saved set, kernels",
                              description=__doc__.split("\n\n")[1])
    p.add_argument("--family", help="only this family (elementwise, movement, reduce, ...)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the census; the exit status (2: an unknown family)."""
    import shapeflow.nn  # noqa: F401  (nn's and quant's primitives are defined on import)
    import shapeflow.quant  # noqa: F401

    from ..errors import ArgumentError
    from ..ops.census import census, format_census

    rows = census()
    families = sorted({r.family for r in rows})
    if args.family is not None and args.family not in families:
        raise ArgumentError(f"no family {args.family!r}",
                            hint=f"the families are {', '.join(families)}")
    print(format_census([r for r in rows if args.family in (None, r.family)]))
    return 0
