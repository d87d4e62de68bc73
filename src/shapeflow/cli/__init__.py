"""The `shapeflow` command: demo, train, summary, memory, graph, run, quant, serve, bench."""

from __future__ import annotations

import argparse


def _version() -> str:
    from .. import __version__
    from ..backend.cpu import buffers, gemm, kernels
    from ..backend.cpu import features as cpu

    casts = ("avx512_bf16" if kernels.bf16_simd() else
             "compiled C" if kernels.available() else "ml_dtypes")
    return (f"shapeflow {__version__} (gemm: {gemm.backend()}, compiled kernels: "
            f"{'on' if kernels.available() else 'off'}, buffer cache: "
            f"{'on' if buffers.enabled() else 'off'})\n{cpu.describe()}\nbf16/fp16 matmul: "
            f"{gemm.half_backend()}; bf16 casts: {casts}")


class _Version(argparse.Action):
    """--version, looked up only when asked (it loads the native libraries)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The parser for `shapeflow [--version] COMMAND ...`, each subcommand from its module."""
    from . import bench, demo, graph, memory, quant, run, serve, summary, train

    p = argparse.ArgumentParser(prog="shapeflow", description=__doc__)
    p.add_argument("--version", action=_Version, nargs=0,
                   help="the version and which native parts of the cpu backend are in use")
    sub = p.add_subparsers(dest="command", required=True)
    for command in (demo, train, summary, memory, graph, run, quant, bench, serve):
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (sys.argv[1:] when None); the exit status (2: a mistake in
    the command line or its input, printed as a shapeflow error with its hint)."""
    from ._inputs import run_command

    return run_command(build_parser().parse_args(argv))
