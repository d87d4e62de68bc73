"""`shapeflow train lstm`: a character-level LSTM (sf.models.CharLSTM) on the bundled text."""

from __future__ import annotations

import time


def train_lstm(steps: int = 300, batch_size: int = 32, block_size: int = 64,
               num_layers: int = 2, hidden_size: int = 256, embed_dim: int = 64,
               lr: float = 3e-3, seed: int = 0, sample_tokens: int = 200) -> dict:
    """Train with Adam, print the falling loss and a sample; return the first and last losses."""
    import numpy as np
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    import shapeflow as sf
    from shapeflow import optim
    from shapeflow.data.datasets import CharDataset, text_corpus
    from shapeflow.models import CharLSTM

    console = Console()
    sf.manual_seed(seed)
    text = text_corpus()
    data = CharDataset(text, block_size)
    model = CharLSTM(data.vocab_size, embed_dim, hidden_size, num_layers)
    opt = optim.Adam(model.parameters(), lr=lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, steps), eta_min=lr / 10)
    rng = np.random.default_rng(seed)
    ids = data.train_ids
    console.print(f"corpus {len(text):,} characters, vocab {data.vocab_size}, "
                  f"{sum(p.numel() for p in model.parameters()):,} parameters "
                  f"(LSTM {num_layers} x {hidden_size}, batch {batch_size} x {block_size} steps)")
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
    out = model.eval().generate(prompt, sample_tokens, temperature=0.8, top_k=20)
    console.print("[bold]sample:[/bold]\n" + data.decode(out[0].tolist()))
    return {"first_loss": losses[0], "last_loss": float(np.mean(losses[-10:]))}
