"""The MLP training step written straight in NumPy: the floor a framework adds overhead to.

784-256-256-10 with ReLU, mean cross-entropy over class indices, plain SGD: the
benchmark's `mlp_step`, forward, backward by hand and update, float32 throughout.
"""

from __future__ import annotations

import numpy as np


def loss_and_grads(params: list[np.ndarray], x: np.ndarray, y: np.ndarray):
    """Mean cross-entropy and the gradient of every parameter ([W1, b1, W2, b2, ...])."""
    weights, biases = params[0::2], params[1::2]
    acts = [x]
    for w, b in zip(weights[:-1], biases[:-1]):
        h = acts[-1] @ w.T
        h += b
        np.maximum(h, 0, out=h)
        acts.append(h)
    logits = acts[-1] @ weights[-1].T
    logits += biases[-1]
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    probs = logits
    probs /= probs.sum(axis=1, keepdims=True)
    n = len(y)
    rows = np.arange(n)
    loss = float(-np.log(probs[rows, y]).mean())
    g = probs  # d loss / d logits = (softmax - onehot) / n
    g[rows, y] -= 1.0
    g *= np.float32(1.0 / n)
    grads = [None] * len(params)
    for i in range(len(weights) - 1, -1, -1):
        grads[2 * i] = g.T @ acts[i]
        grads[2 * i + 1] = g.sum(axis=0)
        if i:
            g = g @ weights[i]
            g *= acts[i] > 0  # ReLU's gradient
    return loss, grads


def make_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray, lr: float = 0.01):
    """One SGD step per call, updating `params` in place."""
    rate = np.float32(lr)

    def step() -> float:
        loss, grads = loss_and_grads(params, x, y)
        for p, g in zip(params, grads):
            g *= rate
            p -= g
        return loss

    return step
