"""`shapeflow train gpt|lstm|resnet`: a character-level GPT (saved as a checkpoint) or LSTM on
the bundled text, a ResNet on digits."""

from __future__ import annotations

import argparse
import sys
import time

from ._schedule import warmup_cosine
from .amp_step import PRECISIONS

DEFAULT_SAVE = "gpt_char.safetensors"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `train` subcommand on an argparse subparsers object."""
    t = subparsers.add_parser("train", help="train a reference model on bundled data")
    t.add_argument("model", choices=["gpt", "lstm", "resnet"])
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch-size", type=int, default=32)
    t.add_argument("--block-size", type=int, default=64)
    t.add_argument("--layers", type=int, default=2)
    t.add_argument("--hidden", type=int, default=256, help="LSTM hidden size (lstm)")
    t.add_argument("--d-model", type=int, default=128)
    t.add_argument("--heads", type=int, default=4)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--precision", default="fp32", choices=list(PRECISIONS),
                   help="gpt: bf16-mixed (sf.autocast), fp16-mixed (autocast + GradScaler), "
                   "bf16-true (bfloat16 weights, AdamW with fp32 master weights)")
    t.add_argument("--epochs", type=int, default=4, help="resnet: passes over the digits")
    t.add_argument("--width", type=int, default=16, help="resnet: channels of the first stage")
    t.add_argument("--sample-tokens", type=int, default=200)
    t.add_argument("--nproc", type=int, default=1,
                   help="data-parallel ranks (MPI); --batch-size is split among them")
    t.add_argument("--val-batches", type=int, default=8,
                   help="batches of the held-out last 10%% of the text for the validation loss")
    t.add_argument("--save", default=None, metavar="PATH",
                   help="the checkpoint to write (atomically): weights and config, the "
                   f"vocabulary for gpt and lstm (default: {DEFAULT_SAVE} for gpt; lstm and "
                   "resnet write one only when given)")
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow train` with parsed arguments; the exit status."""
    from ._inputs import check_positive

    if args.model == "resnet":
        from .train_resnet import train_resnet

        check_positive(epochs=args.epochs, batch_size=args.batch_size, width=args.width)
        train_resnet(epochs=args.epochs, batch_size=args.batch_size, width=args.width,
                     lr=args.lr, seed=args.seed, save=args.save)
        return 0
    if args.model == "lstm":
        from .train_lstm import train_lstm

        check_positive(steps=args.steps, batch_size=args.batch_size, block_size=args.block_size,
                       layers=args.layers, hidden=args.hidden, val_batches=args.val_batches)
        train_lstm(steps=args.steps, batch_size=args.batch_size, block_size=args.block_size,
                   num_layers=args.layers, hidden_size=args.hidden, lr=args.lr, seed=args.seed,
                   sample_tokens=args.sample_tokens, val_batches=args.val_batches,
                   save=args.save)
        return 0
    if args.nproc > 1:  # the same command on N ranks, each training data-parallel
        from .run import launch

        argv = ["train", args.model]
        for key, value in vars(args).items():
            if key in ("model", "nproc", "func", "command") or value in (None, False):
                continue  # (None: options not given, and the top level's --version)
            argv.append(f"--{key.replace('_', '-')}")
            if value is not True:
                argv.append(str(value))
        return launch(args.nproc, [sys.executable, "-m", "shapeflow", *argv])
    check_positive(steps=args.steps, batch_size=args.batch_size, block_size=args.block_size,
                   layers=args.layers, d_model=args.d_model, heads=args.heads,
                   val_batches=args.val_batches)
    train_gpt(steps=args.steps, batch_size=args.batch_size, block_size=args.block_size,
              n_layer=args.layers, n_embd=args.d_model, n_head=args.heads, lr=args.lr,
              seed=args.seed, sample_tokens=args.sample_tokens, save=args.save or DEFAULT_SAVE,
              val_batches=args.val_batches, precision=args.precision)
    return 0


def _batch(ids, rng, batch_size: int, block_size: int):
    """Random windows of ids: inputs and their next characters, int64 [batch, block]."""
    import numpy as np

    import shapeflow as sf

    starts = rng.integers(0, len(ids) - block_size - 1, batch_size)
    x = np.stack([ids[s:s + block_size] for s in starts])
    y = np.stack([ids[s + 1:s + block_size + 1] for s in starts])
    return sf.from_numpy(x), sf.from_numpy(y)


def validation_loss(model, ids, batch_size: int, block_size: int, batches: int,
                    seed: int = 0, precision: str = "fp32") -> float:
    """Mean loss on `batches` fixed random windows of held-out ids, in eval mode, no grad."""
    import numpy as np

    from ..autograd.grad_mode import no_grad
    from .amp_step import AmpStep

    rng = np.random.default_rng(seed)  # the same windows at every call
    was_training = model.training
    model.eval()
    region = AmpStep(precision).autocast
    with no_grad():
        losses = []
        for _ in range(batches):
            with region():
                losses.append(model(*_batch(ids, rng, batch_size, block_size))[1].item())
    model.train(was_training)
    return float(np.mean(losses))


def train_gpt(steps: int = 300, batch_size: int = 32, block_size: int = 64, n_layer: int = 2,
              n_embd: int = 128, n_head: int = 4, lr: float = 3e-3, seed: int = 0,
              sample_tokens: int = 200, save: str | None = DEFAULT_SAVE,
              val_batches: int = 8, precision: str = "fp32") -> dict:
    """Train, print the falling loss, the validation loss and a sample, save a checkpoint;
    return the first and last training losses and the validation loss. `precision`: fp32,
    bf16-mixed, fp16-mixed or bf16-true (cli/amp_step.py)."""
    import numpy as np
    from rich.console import Console

    import shapeflow as sf
    from shapeflow import optim
    from shapeflow.data.datasets import CharDataset, text_corpus
    from shapeflow.distributed.launch import data_parallel
    from shapeflow.models import GPT

    from ..errors import ShapeflowError
    from ._progress import progress_bar
    from .amp_step import AmpStep

    rank, world = data_parallel()  # (0, 1) unless started on several ranks by mpiexec
    console = Console(quiet=rank != 0)
    sf.manual_seed(seed)
    text = text_corpus()
    data = CharDataset(text, block_size)
    if len(data.val_ids) <= block_size + 1:
        raise ShapeflowError(f"--block-size {block_size} is longer than the validation text "
                             f"({len(data.val_ids):,} characters)", hint="use --block-size 64")
    config = dict(vocab_size=data.vocab_size, block_size=block_size, n_layer=n_layer,
                  n_head=n_head, n_embd=n_embd, dropout=0.0)
    model = GPT(**config)
    amp = AmpStep(precision, model)
    if world > 1:  # every rank its own share of each batch; gradients averaged
        model = sf.nn.parallel.DistributedDataParallel(model)
        batch_size = max(1, batch_size // world)
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95),
                      master_weights=amp.master_weights)
    warmup = max(1, steps // 10)
    sched = warmup_cosine(opt, steps, warmup)
    rng = np.random.default_rng([seed, rank])
    console.print(f"corpus {len(text):,} characters ({len(data.val_ids):,} held out), vocab "
                  f"{data.vocab_size}, {sum(p.numel() for p in model.parameters()):,} parameters"
                  + (f", {world} ranks x batch {batch_size}" if world > 1 else "")
                  + (f", {precision}" if precision != "fp32" else ""))

    def val() -> float:
        return validation_loss(model, data.val_ids, batch_size, block_size, val_batches, seed,
                               precision)

    losses = []
    start = time.perf_counter()
    with progress_bar(console, "step {task.completed:>5}") as progress:
        task = progress.add_task("train", total=steps, loss=None)
        for step in range(steps):
            with amp.autocast():
                _, loss = model(*_batch(data.train_ids, rng, batch_size, block_size))
            amp.backward_and_step(loss, opt, model.parameters(), clip=1.0)
            sched.step()
            losses.append(loss.item())
            progress.update(task, advance=1, loss=losses[-1])
            if step % max(1, steps // 10) == 0:
                progress.console.print(f"  step {step:>5}  loss {losses[-1]:.3f}")
    elapsed = time.perf_counter() - start
    val_loss = val()
    last = float(np.mean(losses[-10:]))
    console.print(f"loss {losses[0]:.3f} -> {last:.3f} in {elapsed:.1f} s; validation loss "
                  f"{val_loss:.3f} (the last 10% of the text, never trained on)")
    model = getattr(model, "module", model)  # DDP's wrapped model: plain keys in the file
    if save and rank == 0:
        write_checkpoint({"model": model.state_dict(), "config": config,
                          "vocab": "".join(data.vocab), "steps": steps, "val_loss": val_loss},
                         save)
        console.print(f"saved {save} (weights, config, vocabulary)")
    prompt = sf.tensor([data.encode(text[:block_size // 2])])
    with amp.autocast():
        out = model.generate(prompt, sample_tokens, temperature=0.8, top_k=20)
    console.print("[bold]sample:[/bold]\n" + data.decode(out[0].tolist()), highlight=False)
    return {"first_loss": losses[0], "last_loss": last, "val_loss": val_loss}


def write_checkpoint(checkpoint: dict, path: str) -> None:
    """sf.save, atomically (a crash leaves the previous file, never half of one); an unwritable
    path is the user's to fix: a ShapeflowError, not a traceback."""
    import shapeflow as sf

    from ..errors import ShapeflowError

    try:
        sf.save(checkpoint, path)
    except OSError as err:
        raise ShapeflowError(f"cannot write {path}: {err.strerror or err}",
                             hint="check that its folder exists and is writable") from None


def load_gpt(path: str):
    """(model, vocabulary) from a checkpoint `shapeflow train gpt` wrote."""
    import shapeflow as sf
    from shapeflow.models import GPT

    ckpt = sf.load(path)
    model = GPT(**ckpt["config"])
    model.load_state_dict(ckpt["model"])
    return model, ckpt["vocab"]
