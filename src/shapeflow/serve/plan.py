"""`sf.serve.plan`: what serving a model takes (KV-pool bytes, per-step activation bytes) and,
once calibrated on this machine, how long a step takes.

Bytes come from the same functions the Engine sizes its pool with (kv_pool.pool_num_blocks,
kv_pool.block_bytes) and from shapeflow's memory planner on the meta device, so they are
exact, not estimates. Time is a small linear model fitted to a short run of the real Engine:
a decode step reads every weight once (a), does per-sequence work (b * batch) and reads each
sequence's KV (c * batch * kv_len); a prefill costs d + e * prompt_len. Because a GEMM's time
is rarely linear in a handful of rows, a + b * batch is also measured at each batch size up
to 8 (`tpot_table`) and predictions use it there.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError

__all__ = ["Bucket", "ServePlan", "fit_tpot", "fit_tpot_table", "fit_ttft", "measure_tpot",
           "measure_ttft", "plan"]


@dataclass
class Bucket:
    """One step's size: `tokens` new tokens (a decode batch or a prefill chunk) and the bytes
    of activations the forward holds at its busiest (the planner's inference peak less the
    weights and inputs)."""

    tokens: int
    activation_bytes: int


def _fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares weighted by 1/y: the relative error is what a prediction is judged by."""
    w = 1.0 / np.maximum(np.abs(y), 1e-12)
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    return coef


def fit_tpot(batch, kv_len, seconds) -> tuple[float, float, float]:
    """(a, b, c) of TPOT = a + b * batch + c * batch * kv_len, fitted to measured steps."""
    batch, kv_len, y = (np.asarray(v, np.float64).reshape(-1) for v in (batch, kv_len, seconds))
    if not len(batch) == len(kv_len) == len(y) or len(y) < 3:
        raise ArgumentError("fit_tpot: need at least three (batch, kv_len, seconds) points",
                            op="serve.plan")
    x = np.stack([np.ones_like(batch), batch, batch * kv_len], axis=1)
    a, b, c = _fit(x, y)
    return float(a), float(b), float(c)


def fit_tpot_table(batch, kv_len, seconds, c: float) -> dict[int, float]:
    """Per batch size, the step time left once the KV reads (c * batch * kv_len) are taken
    out: the weight reads and per-sequence work, measured rather than assumed linear (a GEMM
    backend's time is rarely linear in a few rows)."""
    batch, kv_len, y = (np.asarray(v, np.float64).reshape(-1) for v in (batch, kv_len, seconds))
    rest = y - c * batch * kv_len
    return {int(b): float(np.median(rest[batch == b])) for b in np.unique(batch)}


def fit_ttft(prompt_len, seconds) -> tuple[float, float]:
    """(d, e) of TTFT = d + e * prompt_len, fitted to measured prefills."""
    p, y = (np.asarray(v, np.float64).reshape(-1) for v in (prompt_len, seconds))
    if len(p) != len(y) or len(y) < 2:
        raise ArgumentError("fit_ttft: need at least two (prompt_len, seconds) points",
                            op="serve.plan")
    d, e = _fit(np.stack([np.ones_like(p), p], axis=1), y)
    return float(d), float(e)


def _prompt(rng, vocab: int, n: int) -> list[int]:
    # random, and from fresh entropy unless a seed is given: a prompt that shared a prefix
    # with an earlier one would find its blocks in the prefix cache and prefill too fast
    return rng.integers(0, vocab, n).tolist()


def measure_tpot(engine, batch: int, kv_len: int, steps: int = 6, seed: int | None = None,
                 clock=time.perf_counter) -> tuple[float, float]:
    """(median seconds, mean context) of `steps` decode steps of `batch` sequences whose
    prompts hold `kv_len` tokens, through engine.step(). The context is what the timed steps
    attended to on average: prompts prefill a chunk at a time, and the sequences already in
    decode meanwhile, so it is a little over kv_len. `clock`: wall time by default;
    time.process_time counts this process's CPU time only, steadier on a machine other work
    shares (with single-threaded BLAS it equals wall time on an idle one)."""
    from .sampling_params import SamplingParams

    if engine.has_unfinished():
        raise ArgumentError("measure_tpot: the engine is busy; calibrate an idle one",
                            op="serve.plan")
    room = engine.max_model_len - kv_len - 1
    if kv_len < 1 or room < steps:
        raise ArgumentError(f"measure_tpot: kv_len {kv_len} leaves no room for {steps} decode "
                            f"steps in max_model_len {engine.max_model_len}", op="serve.plan")
    rng = np.random.default_rng(seed)
    params = SamplingParams(temperature=0.0, max_tokens=room, ignore_eos=True)  # aborted
    ids = [engine.add_request(_prompt(rng, engine.vocab_size, kv_len), params)
           for _ in range(batch)]
    done = dict.fromkeys(ids, 0)  # tokens generated so far
    times: list[float] = []
    contexts: list[float] = []
    # uncapped: the latency cap would prefill the later prompts a few tokens a step while
    # the first ones decode to their end, and the batch would never decode together
    with engine.uncapped_prefill():
        try:
            while len(times) < steps and engine.has_unfinished():
                pure = all(n >= 1 for n in done.values())  # every prompt in: a decode step
                ctx = kv_len + sum(done.values()) / batch
                t0 = clock()
                outs = engine.step()
                dt = clock() - t0
                for o in outs:
                    done[o.request_id] = len(o.outputs[0].token_ids)
                if pure and len(outs) == batch and not any(o.finished for o in outs):
                    times.append(dt)
                    contexts.append(ctx)
        finally:
            for rid in ids:
                engine.abort(rid)
    if len(times) < steps:
        raise ArgumentError(f"measure_tpot: only {len(times)} decode steps of batch {batch} ran "
                            f"(is max_num_seqs >= {batch}, and is there room past kv_len "
                            f"{kv_len} while the prompts prefill?)", op="serve.plan")
    return float(np.median(times)), float(np.mean(contexts))


def measure_ttft(engine, prompt_len: int, repeats: int = 3, seed: int | None = None,
                 clock=time.perf_counter) -> float:
    """Median seconds from add_request to the first token of a lone `prompt_len` prompt
    (`clock` as for measure_tpot)."""
    from .sampling_params import SamplingParams

    if engine.has_unfinished():
        raise ArgumentError("measure_ttft: the engine is busy; calibrate an idle one",
                            op="serve.plan")
    rng = np.random.default_rng(seed)
    params = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    times = []
    for _ in range(repeats):
        t0 = clock()
        rid = engine.add_request(_prompt(rng, engine.vocab_size, prompt_len), params)
        try:
            while not any(o.request_id == rid and o.outputs[0].token_ids for o in engine.step()):
                pass
            times.append(clock() - t0)
        finally:
            engine.abort(rid)
    return float(np.median(times))


@dataclass
class ServePlan:
    """Memory and (after `calibrate`) latency of serving a model with given Engine settings."""

    model: str
    max_batch: int
    max_len: int
    block_size: int
    kv_dtype: str | None
    dtype: str
    max_num_batched_tokens: int
    num_blocks: int
    block_bytes: int  # one block, keys and values of every layer
    kv_pool_bytes: int  # what the Engine allocates: num_blocks * block_bytes
    kv_bytes_per_token: int  # all layers, keys and values
    weight_bytes: int
    buckets: list[Bucket]
    tpot_coef: tuple[float, float, float] | None = None  # (a, b, c) seconds
    tpot_table: dict[int, float] | None = None  # batch -> a + b * batch, as measured
    ttft_coef: tuple[float, float] | None = None  # (d, e) seconds
    points: dict = field(default_factory=dict)  # what calibrate measured
    _model: object = field(default=None, repr=False, compare=False)

    @property
    def tokens_per_pool(self) -> int:
        """Tokens the pool holds at once (all sequences together)."""
        return self.num_blocks * self.block_size

    def predict_tpot(self, batch, kv_len):
        """Seconds per decode step at `batch` sequences attending to `kv_len` tokens each:
        c * batch * kv_len plus the measured per-batch cost (interpolated between calibrated
        batch sizes; beyond them, the linear a + b * batch from the nearest one)."""
        if self.tpot_coef is None:
            raise ArgumentError("predict_tpot: call plan.calibrate() first", op="serve.plan")
        a, b, c = self.tpot_coef
        batch, kv_len = np.asarray(batch, np.float64), np.asarray(kv_len, np.float64)
        if self.tpot_table:
            xs = np.array(sorted(self.tpot_table), np.float64)
            ys = np.array([self.tpot_table[int(x)] for x in xs])
            base = np.interp(batch, xs, ys)
            base = np.where(batch < xs[0], ys[0] + b * (batch - xs[0]), base)
            base = np.where(batch > xs[-1], ys[-1] + b * (batch - xs[-1]), base)
        else:
            base = a + b * batch
        out = base + c * batch * kv_len
        return float(out) if out.ndim == 0 else out

    def predict_ttft(self, prompt_len):
        """Seconds to the first token of a lone prompt of `prompt_len` tokens."""
        if self.ttft_coef is None:
            raise ArgumentError("predict_ttft: call plan.calibrate() first", op="serve.plan")
        d, e = self.ttft_coef
        out = d + e * np.asarray(prompt_len, np.float64)
        return float(out) if out.ndim == 0 else out

    def engine(self, **kwargs):
        """An Engine with this plan's settings (its pool is `kv_pool_bytes`)."""
        from .engine import Engine

        if self._model is None:
            raise ArgumentError("plan.engine: this plan holds no model", op="serve.plan")
        settings = dict(block_size=self.block_size, max_num_seqs=self.max_batch,
                        max_model_len=self.max_len, kv_dtype=self.kv_dtype,
                        max_num_batched_tokens=self.max_num_batched_tokens,
                        num_blocks=self.num_blocks)
        return Engine(self._model, **{**settings, **kwargs})

    def calibrate(self, engine=None, *, batches=None, kv_lens=None, prompt_lens=None,
                  table_batches=None, steps: int = 6, clock=time.perf_counter) -> ServePlan:
        """Time a few decode steps and prefills through the Engine on this machine and fit
        TPOT(batch, kv_len) and TTFT(prompt_len); returns self. `engine`: an idle Engine of
        the served model (default: one with this plan's settings); `clock`: see
        measure_tpot. `batches` x `kv_lens` (default 1, max_batch/2, max_batch, at most 8;
        max_len/8, /2 and 3/4) give the fit; `table_batches` (default every batch size up to
        8, then powers of two) are timed at the shortest kv_len for the per-batch costs."""
        engine = self.engine() if engine is None else engine
        # room for the decode steps, and for those of early sequences while later ones prefill
        cap = min(engine.max_model_len - steps - 3, engine.max_model_len * 3 // 4)
        if cap < 2:
            raise ArgumentError(f"calibrate: max_len {engine.max_model_len} leaves no room for "
                                f"{steps} decode steps", op="serve.plan")
        top = max(1, min(self.max_batch, 8))
        batches = batches or sorted({1, max(1, top // 2), top})
        kv_lens = kv_lens or sorted({max(1, cap // 8), max(1, cap // 2), cap})
        prompt_lens = prompt_lens or sorted({max(1, cap // 8), max(1, cap // 2), cap})
        if table_batches is None:  # every batch size up to 8, then powers of two
            table_batches = [*range(1, top + 1)] + [
                1 << i for i in range(4, self.max_batch.bit_length()) if 1 << i <= self.max_batch]
        measure_tpot(engine, batches[0], kv_lens[0], steps=2)  # warm up (first-call costs)
        grid = [(b, k) for b in batches for k in kv_lens]
        grid += [(b, min(kv_lens)) for b in table_batches if b not in batches]
        tb, tk, ty = [], [], []
        for b, k in grid:
            seconds, context = measure_tpot(engine, b, k, steps, clock=clock)
            tb.append(b)
            tk.append(context)
            ty.append(seconds)
        pl = list(prompt_lens)
        py = [measure_ttft(engine, p, clock=clock) for p in pl]
        sweep = len(batches) * len(kv_lens)  # the kv slope comes from the full sweeps
        self.tpot_coef = fit_tpot(tb[:sweep], tk[:sweep], ty[:sweep])
        self.tpot_table = fit_tpot_table(tb, tk, ty, self.tpot_coef[2])
        self.ttft_coef = fit_ttft(pl, py)
        self.points = {"tpot": list(zip(tb, tk, ty)), "ttft": list(zip(pl, py))}
        return self

    def to_text(self) -> str:
        """The plan as a printable table."""
        mib = 1 << 20
        kv = self.kv_dtype or self.dtype
        lines = [
            f"serve plan: {self.model}  (max_batch {self.max_batch}, max_len {self.max_len}, "
            f"block_size {self.block_size}, kv {kv})",
            f"  weights        {self.weight_bytes / mib:10.2f} MiB",
            f"  KV pool        {self.kv_pool_bytes / mib:10.2f} MiB  = {self.num_blocks} blocks "
            f"x {self.block_bytes} B ({self.kv_bytes_per_token} B/token, "
            f"{self.tokens_per_pool} tokens)",
            "",
        ]
        head = f"  {'tokens/step':>11}  {'activations':>12}  {'peak total':>12}"
        if self.tpot_coef is not None:
            head += f"  {'TPOT @max_len':>14}  {'TTFT':>10}"
        lines.append(head)
        for bk in self.buckets:
            total = self.weight_bytes + self.kv_pool_bytes + bk.activation_bytes
            row = (f"  {bk.tokens:>11}  {bk.activation_bytes / mib:>8.2f} MiB  "
                   f"{total / mib:>8.2f} MiB")
            if self.tpot_coef is not None:
                tp = (f"{self.predict_tpot(bk.tokens, self.max_len) * 1e3:>11.2f} ms"
                      if bk.tokens <= self.max_batch else f"{'-':>14}")
                tt = (f"{self.predict_ttft(bk.tokens) * 1e3:>7.2f} ms"
                      if bk.tokens < self.max_len else f"{'-':>10}")
                row += f"  {tp}  {tt}"
            lines.append(row)
        if self.tpot_coef is not None:
            a, b, c = self.tpot_coef
            d, e = self.ttft_coef
            lines += ["", f"  TPOT = {a * 1e3:.3f} ms + {b * 1e3:.4f} ms x batch + "
                      f"{c * 1e6:.5f} us x batch x kv_len",
                      f"  TTFT = {d * 1e3:.3f} ms + {e * 1e3:.4f} ms x prompt_len"]
            if self.tpot_table:
                lines.append("  measured a + b x batch: " + ", ".join(
                    f"{k}: {v * 1e3:.3f} ms" for k, v in sorted(self.tpot_table.items())))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()


def _activation_bytes(model, tokens: int) -> int:
    """The memory planner's inference peak of a forward over `tokens` tokens, less weights and
    inputs: laid out as [rows, tokens/rows] with rows the fewest that fit the context."""
    import shapeflow as sf

    ctx = model.config.block_size
    rows = 1
    while -(-tokens // rows) > ctx:
        rows *= 2
    idx = sf.zeros((rows, -(-tokens // rows)), dtype=sf.int64)
    rep = sf.memory.report(model, idx, mode="inference")
    return int(rep.inference_peak - rep.params - rep.inputs)


def plan(model, max_batch: int = 64, max_len: int | None = None, kv_dtype: str | None = None,
         block_size: int = 16, max_num_batched_tokens: int = 512, *,
         num_blocks: int | None = None, kv_cache_memory: int | None = None) -> ServePlan:
    """What an `Engine(model, max_num_seqs=max_batch, max_model_len=max_len, ...)` holds:
    KV-pool bytes (exactly its allocation), activation bytes per step for token buckets
    1, 2, 4, ... up to max_num_batched_tokens; `.calibrate()` adds TPOT and TTFT."""
    from .kv_pool import QUANTIZED, block_bytes, pool_num_blocks

    cfg = getattr(model, "config", None)
    if cfg is None or not hasattr(model, "transformer"):
        raise ArgumentError(f"serve.plan takes a shapeflow GPT, got {type(model).__name__}",
                            op="serve.plan")
    for name, v in (("max_batch", max_batch), ("block_size", block_size),
                    ("max_num_batched_tokens", max_num_batched_tokens)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ArgumentError(f"serve.plan: {name} must be an int >= 1, got {v!r}",
                                op="serve.plan")
    if kv_dtype is not None and kv_dtype not in QUANTIZED:
        raise ArgumentError(f"serve.plan: kv_dtype must be None or one of "
                            f"{', '.join(QUANTIZED)}, got {kv_dtype!r}", op="serve.plan")
    max_len = int(max_len or cfg.block_size)
    if not 1 < max_len <= cfg.block_size:
        raise ArgumentError(f"serve.plan: max_len must lie in [2, {cfg.block_size}] (the "
                            f"model's block_size), got {max_len}", op="serve.plan")
    dtype = model.transformer.wte.weight.detach().numpy().dtype  # as the Engine reads it
    n = pool_num_blocks(model, block_size, num_blocks=num_blocks,
                        kv_cache_memory=kv_cache_memory, max_num_seqs=max_batch,
                        max_model_len=max_len, kv_dtype=kv_dtype, dtype=dtype)
    per_block = block_bytes(model, block_size, kv_dtype, dtype)
    buckets, t = [], 1
    while t <= max_num_batched_tokens:
        buckets.append(Bucket(t, _activation_bytes(model, t)))
        t *= 2
    weights = sum(p.nbytes for _, p in model.named_parameters())  # tied weights once
    name = getattr(model, "name", None) or type(model).__name__
    return ServePlan(model=str(name), max_batch=max_batch, max_len=max_len,
                     block_size=block_size, kv_dtype=kv_dtype, dtype=np.dtype(dtype).name,
                     max_num_batched_tokens=max_num_batched_tokens, num_blocks=n,
                     block_bytes=per_block, kv_pool_bytes=n * per_block,
                     kv_bytes_per_token=per_block // block_size, weight_bytes=int(weights),
                     buckets=buckets, _model=model)
