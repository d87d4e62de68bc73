"""`shapeflow train gpt|lstm|resnet`: a character-level GPT or LSTM on the bundled text,
a ResNet on digits."""

from __future__ import annotations

import argparse
import sys
import time


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
    t.add_argument("--epochs", type=int, default=4, help="resnet: passes over the digits")
    t.add_argument("--width", type=int, default=16, help="resnet: channels of the first stage")
    t.add_argument("--sample-tokens", type=int, default=200)
    t.add_argument("--nproc", type=int, default=1,
                   help="data-parallel ranks (MPI); --batch-size is split among them")
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `shapeflow train` with parsed arguments; the exit status."""
    if args.model == "resnet":
        from .train_resnet import train_resnet

        train_resnet(epochs=args.epochs, batch_size=args.batch_size, width=args.width,
                     lr=args.lr, seed=args.seed)
        return 0
    if args.model == "lstm":
        from .train_lstm import train_lstm

        train_lstm(steps=args.steps, batch_size=args.batch_size, block_size=args.block_size,
                   num_layers=args.layers, hidden_size=args.hidden, lr=args.lr, seed=args.seed,
                   sample_tokens=args.sample_tokens)
        return 0
    if args.model != "gpt":
        print(f"unknown model {args.model!r}: only 'gpt' can be trained from the CLI",
              file=sys.stderr)
        return 2
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
    train_gpt(steps=args.steps, batch_size=args.batch_size, block_size=args.block_size,
              n_layer=args.layers, n_embd=args.d_model, n_head=args.heads, lr=args.lr,
              seed=args.seed, sample_tokens=args.sample_tokens)
    return 0


def train_gpt(steps: int = 300, batch_size: int = 32, block_size: int = 64, n_layer: int = 2,
              n_embd: int = 128, n_head: int = 4, lr: float = 3e-3, seed: int = 0,
              sample_tokens: int = 200) -> dict:
    """Train, print the falling loss and a sample; return the first and last losses."""
    import numpy as np
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    import shapeflow as sf
    from shapeflow import optim
    from shapeflow.data.datasets import CharDataset, text_corpus
    from shapeflow.distributed.launch import data_parallel
    from shapeflow.models import GPT

    rank, world = data_parallel()  # (0, 1) unless started on several ranks by mpiexec
    console = Console(quiet=rank != 0)
    sf.manual_seed(seed)
    text = text_corpus()
    data = CharDataset(text, block_size)
    model = GPT(vocab_size=data.vocab_size, block_size=block_size, n_layer=n_layer,
                n_head=n_head, n_embd=n_embd, dropout=0.0)
    if world > 1:  # every rank its own share of each batch; gradients averaged
        model = sf.nn.parallel.DistributedDataParallel(model)
        batch_size = max(1, batch_size // world)
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.95))
    warmup = max(1, steps // 10)
    sched = optim.lr_scheduler.SequentialLR(opt, [
        optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=warmup),
        optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, steps - warmup)),
    ], milestones=[warmup])
    rng = np.random.default_rng([seed, rank])
    ids = data.train_ids
    console.print(f"corpus {len(text):,} characters, vocab {data.vocab_size}, "
                  f"{sum(p.numel() for p in model.parameters()):,} parameters"
                  + (f", {world} ranks x batch {batch_size}" if world > 1 else ""))
    losses = []
    start = time.perf_counter()
    with Progress(TextColumn("step {task.completed:>5}"), BarColumn(),
                  TextColumn("loss {task.fields[loss]:.3f}"), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("train", total=steps, loss=float("nan"))
        for step in range(steps):
            starts = rng.integers(0, len(ids) - block_size - 1, batch_size)
            x = np.stack([ids[s:s + block_size] for s in starts])
            y = np.stack([ids[s + 1:s + block_size + 1] for s in starts])
            _, loss = model(sf.from_numpy(x), sf.from_numpy(y))
            loss.backward()
            sf.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            sched.step()
            losses.append(loss.item())
            progress.update(task, advance=1, loss=losses[-1])
            if step % max(1, steps // 10) == 0:
                progress.console.print(f"  step {step:>5}  loss {losses[-1]:.3f}")
    console.print(f"loss {losses[0]:.3f} -> {np.mean(losses[-10:]):.3f} in "
                  f"{time.perf_counter() - start:.1f} s")
    prompt = sf.tensor([data.encode(text[:block_size // 2])])
    model = getattr(model, "module", model)
    out = model.generate(prompt, sample_tokens, temperature=0.8, top_k=20)
    console.print("[bold]sample:[/bold]\n" + data.decode(out[0].tolist()))
    return {"first_loss": losses[0], "last_loss": float(np.mean(losses[-10:]))}
