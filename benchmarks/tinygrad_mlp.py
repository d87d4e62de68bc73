"""The benchmark's MLP step in tinygrad (TinyJit, its CPU device), where tinygrad runs here.

tinygrad is optional (`pip install 'shapeflow[bench]'` installs it) and its CPU device
compiles kernels with clang (`apt-get install -y clang`); `make_step` says why when it
cannot run instead of failing the benchmark.
"""

from __future__ import annotations

import numpy as np


def make_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray, lr: float = 0.01):
    """(one jitted SGD step per call, None) with the given weights, or (None, why not)."""
    try:
        from tinygrad import Context, Device, Tensor, TinyJit
        from tinygrad.nn.optim import SGD
    except ImportError:
        return None, "not installed"
    try:
        Device.DEFAULT  # noqa: B018  (raises where no device can run: no clang for CPU)
    except RuntimeError as e:
        return None, f"no usable device ({e}; its CPU device needs clang)"
    weights = [Tensor(p.copy()) for p in params]
    opt = SGD(weights, lr=lr)
    xt, yt = Tensor(x), Tensor(y.astype(np.int32))

    def forward(inp):
        h = inp
        for i in range(0, len(weights) - 2, 2):
            h = (h.matmul(weights[i].T) + weights[i + 1]).relu()
        return h.matmul(weights[-2].T) + weights[-1]

    @TinyJit
    def jitted():
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = forward(xt).sparse_categorical_crossentropy(yt)
            loss.backward()
            opt.step()
        return loss.realize()

    def step() -> float:
        return float(jitted().numpy())

    for _ in range(3):  # TinyJit captures the kernels on the first calls
        step()
    return step, None
