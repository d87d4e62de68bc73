"""`shapeflow compile MODEL [--input SHAPE] [--dynamic B,L] [--buckets L=64,128,...]`: the
memory plan of each shape bucket of a model's compiled inference forward, before any data."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `compile` subcommand on an argparse subparsers object."""
    s = subparsers.add_parser("compile", help="trace a model once on meta and print the "
                              "memory plan of each shape bucket")
    s.add_argument("model", help="mlp, vit, gpt, resnet, lstm, or package.module:factory")
    s.add_argument("--input", help='input shape, e.g. "B,L" or "B,3,224,224" (names are '
                   "symbolic)")
    s.add_argument("--dynamic", help="the dims that vary, by name (default: every name in "
                   "--input)")
    s.add_argument("--buckets", action="append", default=[], metavar="NAME=B1,B2,...",
                   help="upper bounds of a dim's buckets (default: powers of two); repeat "
                   "for each dim")
    s.add_argument("--max", action="append", default=[], metavar="NAME=N",
                   help="the largest size of a dim to plan for (default: B=8, L=the model's "
                   "block size or 1024, others 1024)")
    s.add_argument("--dtype", help="bf16, fp16, fp32 ...")
    s.set_defaults(func=run)


def _pairs(items: list[str], what: str) -> dict:
    from ..errors import ShapeflowError

    out = {}
    for item in items:
        name, sep, values = item.partition("=")
        try:
            out[name.strip()] = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            sep = ""
        if not sep or not name.strip().isidentifier() or not out.get(name.strip()):
            raise ShapeflowError(f"{what}: expected NAME=N[,N...], got {item!r}",
                                 hint=f"e.g. {what} L=64,128,512")
    return out


def _bounds(name: str, buckets: dict, largest: int) -> list[int]:
    """The upper bound of each bucket of `name` up to `largest`."""
    from ..compiler import Buckets

    b, out, n = Buckets(buckets.get(name)), [], 1
    while n <= largest:
        hi = b.of(n)[1]
        out.append(min(hi, largest))
        n = hi + 1
    return out


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow compile` with parsed arguments; the exit status."""
    from .. import dtypes
    from ..compiler import compile as sf_compile
    from ..compiler import mark_dynamic
    from ..errors import ShapeflowError
    from ..inspect.units import format_bytes
    from ..models.registry import build_model, default_input, parse_input
    from ._inputs import fit_overrides, input_dtype, need_input, sizes

    spec = args.input or default_input(args.model)
    if spec is None:
        raise need_input(args.model)
    names = [s for s in sizes(spec) if isinstance(s, str)]
    dynamic = [n.strip() for n in args.dynamic.split(",")] if args.dynamic else names
    unknown = [n for n in dynamic if n not in names]
    if unknown:
        raise ShapeflowError(f"--dynamic names {', '.join(unknown)}, which --input "
                             f"({spec}) does not", hint=f"name dims of --input, e.g. "
                             f"--dynamic {','.join(names) or 'B'}")
    buckets = _pairs(args.buckets, "--buckets")
    largest = {n: v[-1] for n, v in _pairs(args.max, "--max").items()}
    dtype = dtypes.get_dtype(args.dtype) if args.dtype else None
    with __import__("shapeflow").device("meta"):
        model = build_model(args.model, device="meta", **fit_overrides(args.model, sizes(spec)))
    if dtype is not None:
        model = model.to(dtype)
    model.eval()
    block = getattr(getattr(model, "config", None), "block_size", 1024)
    for n in dynamic:
        largest.setdefault(n, 8 if n == "B" else block if n in ("L", "T") else 1024)
    static = {n: largest[n] for n in names if n not in dynamic}  # a named dim held fixed
    x = parse_input(",".join(str(static.get(t, t)) for t in sizes(spec)),
                    dtype=input_dtype(model, dtype))
    for d, n in enumerate(sizes(spec)):  # each dynamic dim traced over [1, its largest]
        if n in dynamic:
            mark_dynamic(x, d, min=1, max=largest[n], name=n)
    compiled = sf_compile(model, dynamic=dynamic and None, buckets=buckets or None)
    inner = compiled._compiled
    # each dim's buckets, the other dims at their largest (the full grid grows as a product)
    grid = []
    for i, n in enumerate(dynamic):
        for b in _bounds(n, buckets, largest[n]):
            point = tuple(b if j == i else largest[m] for j, m in enumerate(dynamic))
            if point not in grid:
                grid.append(point)
    grid = grid or [()]
    print(f"{args.model} {spec}: inference forward, dynamic {', '.join(dynamic) or 'none'}")
    rows = []
    for point in grid:
        at = dict(zip(dynamic, point))
        plan = compiled.plan(x, **at)
        rows.append((plan, at))
    report = compiled.report()
    trace = next((e for e in report.events if e.kind == "trace"), None)
    if trace is None or not rows:
        raise ShapeflowError(f"{args.model} could not be traced", hint=str(report))
    tape = inner.tapes[inner.last_phase]
    print(f"traced once: {tape.ops} ops in {trace.seconds * 1e3:.1f} ms "
          f"({', '.join(f'{n} in [1, {largest[n]}]' for n in dynamic)}); each plan below "
          "is the bucket's arena at its upper bounds, equal to sf.memory.report's "
          "inference activations there")
    width = max(len(_bucket(p)) for p, _ in rows)
    print(f"{'bucket':<{width}}  {'arena':>12}  {'values':>6}")
    for plan, _ in rows:
        print(f"{_bucket(plan):<{width}}  {format_bytes(plan.arena):>12}  {plan.values:>6}")
    return 0


def _bucket(plan) -> str:
    return ", ".join(f"{n} {lo}..{hi}" for n, (lo, hi) in sorted(plan.bounds.items()))
