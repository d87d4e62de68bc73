"""`shapeflow train lstm`: a character-level LSTM (sf.models.CharLSTM) on the bundled text."""

from __future__ import annotations

import time


def train_lstm(steps: int = 300, batch_size: int = 32, block_size: int = 64,
               num_layers: int = 2, hidden_size: int = 256, embed_dim: int = 64,
               lr: float = 3e-3, seed: int = 0, sample_tokens: int = 200,
               val_batches: int = 8, save: str | None = None) -> dict:
    """Train with Adam, print the falling loss, the validation loss and a sample, save a
    checkpoint if `save` is a path; return the first and last losses and the validation loss."""
    import numpy as np
    from rich.console import Console

    import shapeflow as sf
    from shapeflow import optim
    from shapeflow.data.datasets import CharDataset, text_corpus
    from shapeflow.models import CharLSTM

    from ..errors import ShapeflowError
    from ._progress import progress_bar
    from .train import _batch, validation_loss, write_checkpoint

    console = Console()
    sf.manual_seed(seed)
    text = text_corpus()
    data = CharDataset(text, block_size)
    if len(data.val_ids) <= block_size + 1:
        raise ShapeflowError(f"--block-size {block_size} is longer than the validation text "
                             f"({len(data.val_ids):,} characters)", hint="use --block-size 64")
    config = dict(vocab_size=data.vocab_size, embed_dim=embed_dim, hidden_size=hidden_size,
                  num_layers=num_layers)
    model = CharLSTM(**config)
    opt = optim.Adam(model.parameters(), lr=lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, steps), eta_min=lr / 10)
    rng = np.random.default_rng(seed)
    console.print(f"corpus {len(text):,} characters, vocab {data.vocab_size}, "
                  f"{sum(p.numel() for p in model.parameters()):,} parameters "
                  f"(LSTM {num_layers} x {hidden_size}, batch {batch_size} x {block_size} steps)")
    losses = []
    start = time.perf_counter()
    with progress_bar(console, "step {task.completed:>5}") as progress:
        task = progress.add_task("train", total=steps, loss=None)
        for step in range(steps):
            _, loss = model(*_batch(data.train_ids, rng, batch_size, block_size))
            loss.backward()
            sf.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            sched.step()
            losses.append(loss.item())
            progress.update(task, advance=1, loss=losses[-1])
            if step % max(1, steps // 10) == 0:
                progress.console.print(f"  step {step:>5}  loss {losses[-1]:.3f}")
    elapsed = time.perf_counter() - start
    val_loss = validation_loss(model, data.val_ids, batch_size, block_size, val_batches, seed)
    last = float(np.mean(losses[-10:]))
    console.print(f"loss {losses[0]:.3f} -> {last:.3f} in {elapsed:.1f} s; validation loss "
                  f"{val_loss:.3f} (the last 10% of the text, never trained on)")
    if save:
        write_checkpoint({"model": model.state_dict(), "config": config,
                          "vocab": "".join(data.vocab), "steps": steps, "val_loss": val_loss},
                         save)
        console.print(f"saved {save} (weights, config, vocabulary)")
    prompt = sf.tensor([data.encode(text[:block_size // 2])])
    out = model.eval().generate(prompt, sample_tokens, temperature=0.8, top_k=20)
    console.print("[bold]sample:[/bold]\n" + data.decode(out[0].tolist()), highlight=False)
    return {"first_loss": losses[0], "last_loss": last, "val_loss": val_loss}


def load_lstm(path: str):
    """(model, vocabulary) from a checkpoint `shapeflow train lstm --save PATH` wrote."""
    import shapeflow as sf
    from shapeflow.models import CharLSTM

    ckpt = sf.load(path)
    model = CharLSTM(**ckpt["config"])
    model.load_state_dict(ckpt["model"])
    return model, ckpt["vocab"]
