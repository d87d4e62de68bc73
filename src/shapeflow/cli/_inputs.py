"""What the commands share: reading --input, fitting a reference model to it, and telling a
user's mistake (a shapeflow error with its hint, exit status 2) from a bug (a traceback)."""

from __future__ import annotations

import argparse
import math
import sys

USAGE_ERROR = 2  # argparse's status for a command line it cannot use


def sizes(spec: str) -> list:
    """`"B,3,32,32"` -> ["B", 3, 32, 32] (names stay symbolic)."""
    return [int(t) if t.lstrip("-").isdigit() else t for t in spec.replace(" ", "").split(",")]


def fit_overrides(name: str, dims: list) -> dict:
    """Fit a reference model to the input asked for (image size, channels, features)."""
    if name == "vit" and len(dims) == 4 and all(type(s) is int for s in dims[1:]):
        _, c, h, w = dims
        if h == w:
            return {"in_channels": c, "image_size": h}
    if name == "mlp" and len(dims) >= 2 and all(type(s) is int for s in dims[1:]):
        return {"in_features": math.prod(dims[1:])}
    return {}


def input_dtype(model, dtype=None):
    """The dtype to trace `model` with: int64 token ids where its first layer is an
    embedding (gpt, lstm, a factory's language model), else `dtype` (None: float32)."""
    from .. import dtypes
    from ..nn import Embedding

    first = next((m for m in model.modules() if not any(True for _ in m.children())), None)
    return dtypes.int64 if isinstance(first, Embedding) else dtype


def need_input(model: str):
    """The error for a module:factory model given without --input."""
    from ..errors import ShapeflowError

    if ":" not in model:  # not a factory: an unknown name, which build_model says first
        from ..models.registry import build_model

        build_model(model, device="meta")
    return ShapeflowError(f"--input is needed for the model {model!r}",
                          hint='give the input shape, e.g. --input "B,3,32,32" (names such as '
                          "B stay symbolic)")


def check_positive(**values) -> None:
    """A ShapeflowError naming the first option (given as its dest) that is not >= 1."""
    from ..errors import ShapeflowError

    for dest, v in values.items():
        if v is not None and v < 1:
            option = "--" + dest.replace("_", "-")
            raise ShapeflowError(f"{option} must be at least 1, got {v}",
                                 hint=f"e.g. {option} 1")


def run_command(args: argparse.Namespace) -> int:
    """Run a parsed command: a ShapeflowError (the user's to fix) is printed with its hint,
    not as a traceback, and gives exit status 2."""
    from ..errors import ShapeflowError

    try:
        return args.func(args)
    except ShapeflowError as err:
        if err.hint is None:
            err.hint = f"`shapeflow {args.command} --help` lists the options"
        print(f"{err.kind}: {err}", file=sys.stderr)
        return USAGE_ERROR
