"""`shapeflow memory MODEL ...`: plan a training step's memory on paper (gpt, vit, mlp, resnet,
lstm or module:factory).

Builds the model on the meta device (nothing is allocated, so a 175B GPT plans in seconds),
traces one step, prints the report, and with --devices the per-device plan under ZeRO and
tensor/sequence parallelism.
"""

from __future__ import annotations

import argparse

# sf.memory.report's precisions (inspect/memory/report.py PRECISIONS; a test keeps them equal)
PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "bf16-true", "fp16-true")

# --dtype: what the weights are held in (16 bits: with fp32 master weights, "-true")
_DTYPE = {"fp32": "fp32", "float32": "fp32", "bf16": "bf16-true", "bfloat16": "bf16-true",
          "fp16": "fp16-true", "float16": "fp16-true"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `memory` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser(
        "memory", help="what a training step keeps: report and per-device plans (meta device)",
        description=__doc__.split("\n\n")[1])
    p.add_argument("model", help="gpt, vit, mlp, resnet, lstm, or package.module:factory "
                   "(token ids are given to a model whose first layer is an embedding)")
    g = p.add_argument_group("gpt")
    g.add_argument("--layers", type=int, help="transformer blocks (gpt n_layer, vit depth)")
    g.add_argument("--d-model", type=int, help="hidden size (gpt n_embd, vit dim)")
    g.add_argument("--heads", type=int, help="attention heads")
    g.add_argument("--seq", type=int, default=1024, help="sequence length (gpt)")
    g.add_argument("--vocab", type=int, default=50304, help="vocabulary size (gpt)")
    g.add_argument("--dropout", type=float, default=0.0)
    v = p.add_argument_group("vit")
    v.add_argument("--image-size", type=int, default=224)
    v.add_argument("--patch-size", type=int, default=16)
    v.add_argument("--classes", type=int, default=1000)
    p.add_argument("--input", help='input shape for module:factory models, e.g. "B,3,32,32"')
    p.add_argument("--batch", type=int, default=1, help="micro-batch per device")
    p.add_argument("--precision", default=None, choices=list(PRECISIONS),
                   help="bf16-mixed/fp16-mixed: the step under sf.autocast (fp32 weights, "
                   "16-bit weight copies and activations); bf16-true/fp16-true: 16-bit "
                   "weights, grads and activations, fp32 master weights and optimizer state")
    p.add_argument("--dtype", default=None, choices=sorted(_DTYPE),
                   help="the weights' dtype: bf16/fp16 mean --precision bf16-true/fp16-true")
    p.add_argument("--optimizer", default="adamw", help="adamw, adam, momentum, sgd, none")
    p.add_argument("--checkpoint", action="store_true", help="recompute every block in backward")
    p.add_argument("--recompute", default=None, choices=["none", "selective", "full"],
                   help="selective: recompute attention cores (Korthikanti et al. 2022); "
                   "full: every block (--checkpoint)")
    p.add_argument("--inference", action="store_true", help="plan a forward without grad")
    p.add_argument("--attention", default=None, choices=["flash", "math"],
                   help="attention kernel: flash keeps O(seq), math the [seq, seq] "
                   "probabilities (Korthikanti et al.); default flash")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--zero", type=int, default=0, choices=[0, 1, 2, 3])
    p.add_argument("--tensor-parallel", type=int, default=1)
    p.add_argument("--sequence-parallel", action="store_true")
    p.set_defaults(func=run)


def precision(args) -> str:
    """The report's precision from --precision or --dtype (one of them, or fp32)."""
    if args.precision is not None and args.dtype is not None:
        from ..inspect.memory import MemoryPlanError

        raise MemoryPlanError("shapeflow memory: give --precision or --dtype, not both")
    if args.precision is not None:
        return args.precision
    return _DTYPE[args.dtype or "fp32"]


def build(args):
    """(model on meta, inputs, target) for the arguments."""
    from .. import dtypes
    from ..factories import empty
    from ..models.registry import DEFAULTS, build_model, parse_input

    if args.model == "gpt":
        from ..models import GPT

        d = DEFAULTS["gpt"][1]
        model = GPT(vocab_size=args.vocab, block_size=args.seq, n_layer=args.layers or d[
            "n_layer"], n_head=args.heads or d["n_head"], n_embd=args.d_model or d["n_embd"],
                    dropout=args.dropout, device="meta")
        idx = empty(args.batch, args.seq, dtype=dtypes.int64, device="meta")
        return model, (idx, idx)
    if args.model == "vit":
        d = DEFAULTS["vit"][1]
        model = build_model("vit", device="meta", image_size=args.image_size,
                            patch_size=args.patch_size, num_classes=args.classes,
                            dim=args.d_model or d["dim"], depth=args.layers or d["depth"],
                            heads=args.heads or d["heads"], dropout=args.dropout)
        x = empty(args.batch, 3, args.image_size, args.image_size, device="meta")
        return model, (x,)
    spec = args.input
    if spec is None:
        from ..models.registry import default_input

        spec = default_input(args.model)
    if spec is None:
        from ._inputs import need_input

        raise need_input(args.model)
    from ._inputs import fit_overrides, input_dtype, sizes

    model = build_model(args.model, device="meta", **fit_overrides(args.model, sizes(spec)))
    # B is the batch; other names stay symbolic, and the report gives expressions in them
    spec = ",".join(str(args.batch) if tok.strip() == "B" else tok for tok in spec.split(","))
    x = parse_input(spec, dtype=input_dtype(model))  # token ids for lstm and kin
    return model, (x,)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow memory` with parsed arguments; the exit status."""
    from ..device import meta
    from ..inspect.memory import report
    from ._inputs import check_positive

    check_positive(layers=args.layers, d_model=args.d_model, heads=args.heads, seq=args.seq,
                   vocab=args.vocab, batch=args.batch, devices=args.devices,
                   tensor_parallel=args.tensor_parallel)
    with meta:  # the model is built there directly: its weights are never allocated
        model, inputs = build(args)
    rep = report(model, *inputs, optimizer=None if args.optimizer == "none" else args.optimizer,
                 precision=precision(args),
                 mode="inference" if args.inference else "train",
                 recompute="full" if args.checkpoint else args.recompute,
                 attention=args.attention)
    print(rep)
    if args.devices > 1 or args.tensor_parallel > 1 or args.zero:
        print(rep.plan(devices=args.devices, zero=args.zero,
                       tensor_parallel=args.tensor_parallel,
                       sequence_parallel=args.sequence_parallel))
    return 0
