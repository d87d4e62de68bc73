"""The seed's question as a picture: serving latency against batch size, prompt length and KV
length (from `bench.sweep`), with a plan's predictions drawn over the measurements."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeflowError


def sweep_points(runs: dict, bin_tokens: int = 64) -> dict:
    """The measured series of a sweep, in ms: median TPOT / ITL against concurrency, median TTFT
    against prompt length, and mean ITL per `bin_tokens`-wide bin of KV length (prompt +
    tokens generated so far, from the concurrency-1 runs; the mean, as tokens streamed in
    bursts give many near-zero gaps and one long one)."""
    batch = [(b["concurrency"], b["result"]["median_tpot_ms"], b["result"]["median_itl_ms"],
              b["input_len"] + b["output_len"] / 2) for b in runs.get("batch", [])]
    prompt = [(p["input_len"], p["result"]["median_ttft_ms"]) for p in runs.get("prompt", [])]
    kv, gaps = [], []
    for p in runs.get("prompt", []):
        r = p["result"]
        for n_in, itl, err in zip(r["input_lens"], r["itls"], r["errors"]):
            if not err:
                kv += [n_in + 1 + j for j in range(len(itl))]
                gaps += list(itl)
    kv_bins: list[tuple[float, float]] = []
    if kv:
        kv_a, gap_a = np.asarray(kv), np.asarray(gaps) * 1000
        for b in np.unique(kv_a // bin_tokens):
            sel = kv_a // bin_tokens == b
            kv_bins.append((float(np.median(kv_a[sel])), float(np.mean(gap_a[sel]))))
    return {"batch": batch, "prompt": prompt, "kv": kv_bins}


def _predict(predictor, fn: str, *args) -> float | None:
    """A prediction in ms (the plan's are seconds), or None when the predictor has none."""
    f = getattr(predictor, fn, None) if predictor is not None else None
    return None if f is None else 1000 * float(f(*args))


def plot_sweep(runs: dict, path: str | None = None, predictor=None, title: str = ""):
    """Three panels (TPOT vs concurrency, TTFT vs prompt length, ITL vs KV length), measured
    and, given a `predictor` (a calibrated `sf.serve.plan`), predicted; the matplotlib Figure,
    saved to `path` when one is given."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ShapeflowError("bench --plot needs matplotlib",
                             hint="pip install 'shapeflow[plot]'") from None
    pts = sweep_points(runs)
    fig = Figure(figsize=(13, 4))
    axes = fig.subplots(1, 3)
    specs = [
        (axes[0], [(c, t) for c, t, _, _ in pts["batch"]], "concurrency (batch size)",
         "median TPOT (ms)", "latency vs batch size",
         [(c, _predict(predictor, "predict_tpot", c, int(kv))) for c, _, _, kv in pts["batch"]]),
        (axes[1], pts["prompt"], "prompt length (tokens)", "median TTFT (ms)",
         "latency vs prompt length",
         [(n, _predict(predictor, "predict_ttft", n)) for n, _ in pts["prompt"]]),
        (axes[2], pts["kv"], "KV length (tokens), batch 1", "mean ITL (ms)",
         "latency vs KV length",
         [(k, _predict(predictor, "predict_tpot", 1, int(k))) for k, _ in pts["kv"]]),
    ]
    for ax, measured, xlabel, ylabel, name, predicted in specs:
        if measured:
            ax.plot(*zip(*measured), "o-", label="measured")
        predicted = [(x, y) for x, y in predicted if y is not None]
        if predicted:
            ax.plot(*zip(*predicted), "--", color="gray", label="plan prediction")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(name)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if pts["batch"]:
        axes[0].set_xscale("log", base=2)
    if pts["prompt"]:
        axes[1].set_xscale("log", base=2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
