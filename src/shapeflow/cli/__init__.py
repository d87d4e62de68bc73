"""The `shapeflow` command: demo, train, summary, memory, graph, run, compile, quant, serve,
bench, ops."""

from __future__ import annotations

import argparse


def _version(verbose: bool = False) -> str:
    from .. import __version__
    from ..backend.cpu import buffers, gemm, kernels
    from ..backend.cpu import features as cpu

    casts = ("avx512_bf16" if kernels.bf16_simd() else
             "compiled C" if kernels.available() else "ml_dtypes")
    text = (f"shapeflow {__version__} (gemm: {gemm.backend()}, compiled kernels: "
            f"{'on' if kernels.available() else 'off'}, buffer cache: "
            f"{'on' if buffers.enabled() else 'off'})\n{cpu.describe()}\nbf16/fp16 matmul: "
            f"{gemm.half_backend()}; bf16 casts: {casts}")
    return text + "\n" + _verbose() if verbose else text


_PATHS = ("mkl", "compiled", "numpy")  # the cpu ladder's rungs, fastest first


def _verbose() -> str:
    """The compiled libraries and, per kernel of the cpu table, the calls of each path that
    ran in this process (`sf.backends.cpu.kernel_stats()`)."""
    from ..backends import cpu as backend

    lines = ["libraries:"]
    lines += [f"  {name}: {status}" for name, status in backend.libraries().items()]
    per_kernel: dict[str, dict[str, int]] = {}
    for (kernel, path), calls in sorted(backend.kernel_stats().items()):
        per_kernel.setdefault(kernel, {})[path] = calls
    if not per_kernel:
        return "\n".join([*lines, "kernel calls in this process: none yet"])
    lines.append("kernel calls in this process, per path (mkl, compiled, numpy):")
    width = max(map(len, per_kernel))
    for kernel, paths in per_kernel.items():
        order = [p for p in _PATHS if p in paths] + [p for p in paths if p not in _PATHS]
        lines.append(f"  {kernel:<{width}}  " + ", ".join(f"{p} {paths[p]}" for p in order))
    return "\n".join(lines)


class _Version(argparse.Action):
    """--version (with --verbose: libraries and kernel paths), looked up only when asked
    (it loads the native libraries)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version(getattr(namespace, "verbose", False)))
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The parser for `shapeflow [--version] COMMAND ...`, each subcommand from its module."""
    from . import bench, compile, demo, graph, memory, ops, quant, run, serve, summary, train

    p = argparse.ArgumentParser(prog="shapeflow", description=__doc__)
    p.add_argument("--verbose", action="store_true",
                   help="with --version: the compiled libraries, and each kernel's calls per "
                   "path (mkl, compiled, numpy) in this process")
    p.add_argument("--version", action=_Version, nargs=0,
                   help="the version and which native parts of the cpu backend are in use")
    sub = p.add_subparsers(dest="command", required=True)
    for command in (demo, train, summary, memory, graph, run, compile, quant, bench, serve,
                    ops):
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (sys.argv[1:] when None); the exit status (2: a mistake in
    the command line or its input, printed as a shapeflow error with its hint)."""
    import sys

    from ._inputs import run_command

    argv = sys.argv[1:] if argv is None else list(argv)
    if "--version" in argv and "--verbose" in argv:  # --version acts as soon as it is read
        argv = ["--verbose", *(a for a in argv if a != "--verbose")]
    return run_command(build_parser().parse_args(argv))
