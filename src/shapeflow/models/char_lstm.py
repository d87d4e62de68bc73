"""A character-level LSTM language model: embedding, a 2-layer LSTM, a linear head."""

from __future__ import annotations

import numpy as np

from .. import nn
from ..autograd import no_grad
from ..nn import functional as F


class CharLSTM(nn.Module):
    """idx [B, L] -> logits [B, L, vocab]; forward(idx, targets) also returns the loss.

    As Karpathy's char-rnn: the LSTM's memory of every step (its per-step gates) is what a
    training step keeps, so its activation memory grows with L (see sf.memory.report).
    """

    def __init__(self, vocab_size: int, embed_dim: int = 64, hidden_size: int = 256,
                 num_layers: int = 2, dropout: float = 0.0, device=None) -> None:
        super().__init__()
        self.vocab_size, self.hidden_size, self.num_layers = vocab_size, hidden_size, num_layers
        self.embedding = nn.Embedding(vocab_size, embed_dim, device=device)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers, batch_first=True,
                            dropout=dropout, device=device)
        self.head = nn.Linear(hidden_size, vocab_size, device=device)

    def forward(self, idx, targets=None, state=None):
        """(logits, loss or None); pass `state` (h, c) to continue from a previous chunk."""
        out, state = self.lstm(self.embedding(idx), state)
        logits = self.head(out)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss

    @no_grad()
    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, generator=None):
        """Append max_new_tokens sampled tokens, carrying the LSTM's state step to step."""
        from ..random import get_rng
        from ..tensor import tensor

        rng = get_rng(generator)
        tokens = idx.numpy().astype(np.int64)
        out, state = self.lstm(self.embedding(idx))
        logits = self.head(out)
        for _ in range(max_new_tokens):
            last = logits.numpy()[:, -1, :].astype(np.float64) / max(temperature, 1e-8)
            if top_k is not None:
                kth = np.sort(last, axis=-1)[:, -min(top_k, last.shape[-1])][:, None]
                last = np.where(last < kth, -np.inf, last)
            probs = np.exp(last - last.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            nxt = np.array([rng.choice(len(p), p=p) for p in probs])
            tokens = np.concatenate([tokens, nxt[:, None]], axis=1)
            out, state = self.lstm(self.embedding(tensor(nxt[:, None])), state)
            logits = self.head(out)
        return tensor(tokens)
