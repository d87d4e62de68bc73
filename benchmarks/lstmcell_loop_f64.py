"""PyTorch's time-sequence-prediction example in shapeflow and in PyTorch, same weights.

Two `nn.LSTMCell`s (1 -> 51 -> 51) and a Linear (51 -> 1) stepped from Python over the
time steps of a batch of sine waves, float64 throughout, MSE loss, trained with
`optim.LBFGS(lr=0.8)` closures: the example's program, written once against a torch-like
module (`torch` or `shapeflow`), so both sides run the same code op for op. One
measurement is one LBFGS step of `max_iter` iterations (each a forward and a backward
through every time step).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

if __name__ == "__main__":  # one math thread, set before NumPy or PyTorch loads its own
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

HIDDEN = 51
STEPS = 200  # time steps per sequence (the example's 999, shortened)
BATCH = 97  # the example: 100 waves, the first 3 held out for its test
MAX_ITER = 3  # LBFGS iterations per measured step (the example's default is 20)


def waves(batch: int = BATCH, steps: int = STEPS, period: float = 20.0, seed: int = 2):
    """(input, target) [batch, steps] float64: sines shifted by a random phase (the example's
    generate_sine_wave.py), target = input one step later."""
    rng = np.random.RandomState(seed)
    x = np.arange(steps + 1) + rng.randint(-4 * int(period), 4 * int(period),
                                            batch).reshape(batch, 1)
    data = np.sin(x / period).astype(np.float64)
    return data[:, :-1].copy(), data[:, 1:].copy()


def build(lib: ModuleType, hidden: int = HIDDEN):
    """The example's `Sequence` model in `lib` (torch or shapeflow), in float64."""
    nn = lib.nn

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, hidden)
            self.lstm2 = nn.LSTMCell(hidden, hidden)
            self.linear = nn.Linear(hidden, 1)

        def forward(self, input):
            outputs = []
            b = input.size(0)
            h_t = lib.zeros(b, hidden, dtype=lib.float64)
            c_t = lib.zeros(b, hidden, dtype=lib.float64)
            h_t2 = lib.zeros(b, hidden, dtype=lib.float64)
            c_t2 = lib.zeros(b, hidden, dtype=lib.float64)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                outputs += [self.linear(h_t2)]
            return lib.cat(outputs, dim=1)

    return Sequence().double()


def copy_into(src, dst) -> None:
    """dst's parameters <- src's (shapeflow -> torch), by name."""
    import torch

    values = {k: np.array(v.detach().numpy()) for k, v in src.state_dict().items()}
    dst.load_state_dict({k: torch.from_numpy(v) for k, v in values.items()})


def closure_for(lib: ModuleType, model, opt, x, y):
    """The example's closure: zero the grads, forward, MSE, backward; returns the loss."""
    criterion = lib.nn.MSELoss()

    def closure():
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        return loss

    return closure


def make(steps: int = STEPS, batch: int = BATCH, max_iter: int = MAX_ITER, seed: int = 0):
    """{"shapeflow": fn, "torch": fn}: one LBFGS step each, from the same weights and data."""
    import torch

    import shapeflow as sf

    sf.manual_seed(seed)
    model, twin = build(sf), build(torch)
    copy_into(model, twin)
    xa, ya = waves(batch, steps)
    opt = sf.optim.LBFGS(model.parameters(), lr=0.8, max_iter=max_iter)
    topt = torch.optim.LBFGS(twin.parameters(), lr=0.8, max_iter=max_iter)
    c = closure_for(sf, model, opt, sf.tensor(xa), sf.tensor(ya))
    tc = closure_for(torch, twin, topt, torch.tensor(xa), torch.tensor(ya))
    return {"shapeflow": lambda: opt.step(c), "torch": lambda: topt.step(tc)}


def row(compare, rounds: int, quick: bool) -> dict:
    """The `lstmcell_loop_f64` row: run.py's `compare` over `make()`'s two sides."""
    return compare(make(), rounds, 1 if quick else 3, 1)


def main() -> int:
    """Print the row alone (`python benchmarks/lstmcell_loop_f64.py [--quick]`)."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.run import compare

    r = row(compare, 3, "--quick" in sys.argv)
    s, t = r["shapeflow"]["median_s"], r["torch"]["median_s"]
    print(f"lstmcell_loop_f64: shapeflow {s * 1e3:.1f} ms, torch {t * 1e3:.1f} ms, ratio "
          f"{s / t:.2f}, spread {r['shapeflow']['spread']:.0%}/{r['torch']['spread']:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
