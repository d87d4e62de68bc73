"""The models `shapeflow quant` measures: from a checkpoint, or trained briefly here, with the
data they are measured on (held-out digits, held-out text)."""

from __future__ import annotations

from dataclasses import dataclass

from ._schedule import warmup_cosine

DIGITS_MLP = dict(in_features=64, hidden=[128, 64], out_features=10)


@dataclass
class Subject:
    """A model with its evaluation inputs, labels, calibration batches, and where it came from."""

    model: object
    inputs: tuple
    target: object
    calibration: list
    origin: str


def train_classifier(model, epochs: int, seed: int = 0, lr: float = 3e-3):
    """The demo's recipe (AdamW, warmup then cosine, label smoothing) on the digits, briefly."""
    import shapeflow as sf
    from shapeflow import nn, optim
    from shapeflow.data import DataLoader
    from shapeflow.data.datasets import digits

    sf.manual_seed(seed)
    loader = DataLoader(digits("train"), batch_size=64, shuffle=True, seed=seed)
    opt = optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    total = max(2, epochs * len(loader))
    warmup = max(1, total // 20)
    sched = warmup_cosine(opt, total, warmup)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()
    for _ in range(epochs):
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            sched.step()
    model.eval()
    return model


def digits_subject(name: str, checkpoint: str | None, epochs: int, seed: int) -> Subject:
    """The demo ViT or a digits MLP: from a state-dict checkpoint, else trained `epochs` here;
    measured on the 360 test digits, calibrated on 4 training batches."""
    import shapeflow as sf
    from shapeflow.data.datasets import digits
    from shapeflow.models import MLP, ViT

    from .demo import DEMO_VIT

    sf.manual_seed(seed)
    model = ViT(**DEMO_VIT) if name == "vit" else MLP(**DIGITS_MLP)
    if checkpoint:
        model.load_state_dict(_state_dict(sf.load(checkpoint), checkpoint))
        origin = f"{name} from {checkpoint}"
    else:
        train_classifier(model, epochs, seed)
        origin = (f"no --checkpoint: a {'demo ViT' if name == 'vit' else 'digits MLP'} trained "
                  f"here for {epochs} epochs (seed {seed})")
    test, train = digits("test"), digits("train")
    x, y = test.tensors
    flat = name == "mlp"
    if flat:
        x = x.reshape(x.shape[0], -1)
    calib = [train.tensors[0][i * 64:(i + 1) * 64] for i in range(4)]
    if flat:
        calib = [c.reshape(c.shape[0], -1) for c in calib]
    model.eval()
    return Subject(model, (x,), y, calib, origin)


def gpt_subject(checkpoint: str | None, seed: int, batches: int = 4,
                block_size: int = 64) -> Subject:
    """The character GPT `shapeflow train gpt` saves, else a random one of its default size;
    measured on fixed windows of the held-out last 10% of the text."""
    import numpy as np

    import shapeflow as sf
    from shapeflow.data.datasets import CharDataset, text_corpus
    from shapeflow.models import GPT

    text = text_corpus()
    if checkpoint:
        from .train import load_gpt

        model, vocab = load_gpt(checkpoint)
        block_size = model.config.block_size
        data = CharDataset(text, block_size, vocab=vocab)
        origin = f"gpt from {checkpoint}"
    else:
        sf.manual_seed(seed)
        data = CharDataset(text, block_size)
        model = GPT(vocab_size=data.vocab_size, block_size=block_size, n_layer=2, n_head=4,
                    n_embd=128, dropout=0.0)
        origin = ("no --checkpoint: a GPT with random weights (train one with `shapeflow train "
                  "gpt`, then --checkpoint gpt_char.safetensors)")
    rng = np.random.default_rng(seed)
    ids = data.val_ids

    def windows(n: int, source):
        starts = rng.integers(0, len(source) - block_size - 1, n)
        x = np.stack([source[s:s + block_size] for s in starts])
        y = np.stack([source[s + 1:s + block_size + 1] for s in starts])
        return sf.from_numpy(x), sf.from_numpy(y)

    x, y = windows(8 * batches, ids)
    calib = [windows(8, data.train_ids)[0] for _ in range(2)]
    model.eval()
    return Subject(model, (x,), y, calib, origin)


def _state_dict(loaded, path: str) -> dict:
    from ..errors import CheckpointError

    if isinstance(loaded, dict) and "model" in loaded and isinstance(loaded["model"], dict):
        return loaded["model"]
    if isinstance(loaded, dict):
        return loaded
    raise CheckpointError(f"{path} holds no state dict", hint="write one with "
                          "`shapeflow demo --out FILE` or sf.save(model.state_dict(), FILE)")
