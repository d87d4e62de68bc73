"""The serving engine: requests in, one scheduler iteration per `step()`, outputs out.

vLLM's offline API: `Engine(model, tokenizer).generate(prompts, SamplingParams(...))`; the
server drives `add_request` / `step` / `abort` from one thread (the Engine is not
thread-safe). Each step: the scheduler picks decodes and prefill chunks, the runner runs
them over the paged pool, the sampler draws, and each completion's new tokens and text
(held back while it could still become a stop string) come back as RequestOutputs.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import deque
from collections.abc import Sequence as _Seq

import numpy as np

from ..autograd.grad_mode import no_grad
from ..errors import ArgumentError, ShapeflowError
from .kv_pool import QUANTIZED, KVPool, pool_num_blocks
from .outputs import CompletionOutput, RequestMetrics, RequestOutput
from .runner import ModelRunner
from .sampler import make_rng, sample
from .sampling_params import SamplingParams
from .scheduler import FINISHED, RUNNING, WAITING, Scheduler, Sequence, next_prefill_cap

__all__ = ["Engine"]

PENDING = "pending"  # a completion n > 1 waiting for its first sibling's prompt


class _Request:
    __slots__ = ("request_id", "prompt", "prompt_ids", "params", "seqs", "metrics", "forked",
                 "finished")

    def __init__(self, request_id, prompt, prompt_ids, params, metrics) -> None:
        self.request_id, self.prompt, self.prompt_ids = request_id, prompt, prompt_ids
        self.params, self.metrics = params, metrics
        self.seqs: list[Sequence] = []
        self.forked = False
        self.finished = False


def _fail(msg: str) -> ArgumentError:
    return ArgumentError(msg, op="serve")


class Engine:
    """Continuous-batching inference of a GPT over a paged KV cache (see the module doc).

    `num_blocks` or `kv_cache_memory` (bytes) size the pool; `max_model_len` defaults to the
    model's block_size; `kv_dtype` None keeps K/V in the model's dtype, "int8" / "fp8-e4m3" /
    "fp8-e5m2" quantizes them per token and head.

    With chunked prefill, a step that runs decodes adds at most `max_prefill_tokens_per_step`
    prompt tokens; None (the default) sizes that from the measured step times so the
    prefill adds about `prefill_latency_budget` times a decode-only step's cycle (the
    decodes' inter-token latency stays near its median while a long prompt arrives).
    """

    def __init__(self, model, tokenizer=None, *, block_size: int = 16,
                 num_blocks: int | None = None, kv_cache_memory: int | None = None,
                 max_num_seqs: int = 64, max_num_batched_tokens: int = 512,
                 max_model_len: int | None = None, enable_prefix_caching: bool = True,
                 enable_chunked_prefill: bool = True, kv_dtype: str | None = None,
                 seed: int = 0, model_name: str | None = None,
                 max_prefill_tokens_per_step: int | None = None,
                 prefill_latency_budget: float = 0.5) -> None:
        cfg = getattr(model, "config", None)
        if cfg is None or not hasattr(model, "transformer"):
            raise _fail(f"Engine serves a shapeflow GPT (nanoGPT layout), got "
                        f"{type(model).__name__}")
        for name, v in (("block_size", block_size), ("max_num_seqs", max_num_seqs),
                        ("max_num_batched_tokens", max_num_batched_tokens)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise _fail(f"Engine: {name} must be an int >= 1, got {v!r}")
        if max_prefill_tokens_per_step is not None and (
                not isinstance(max_prefill_tokens_per_step, int)
                or isinstance(max_prefill_tokens_per_step, bool)
                or max_prefill_tokens_per_step < 1):
            raise _fail(f"Engine: max_prefill_tokens_per_step must be None or an int >= 1, "
                        f"got {max_prefill_tokens_per_step!r}")
        if not (isinstance(prefill_latency_budget, (int, float))
                and prefill_latency_budget > 0):
            raise _fail(f"Engine: prefill_latency_budget must be a number > 0, got "
                        f"{prefill_latency_budget!r}")
        if kv_dtype is not None and kv_dtype not in QUANTIZED:
            raise _fail(f"Engine: kv_dtype must be None or one of {', '.join(QUANTIZED)}, got "
                        f"{kv_dtype!r}")
        self.max_model_len = int(max_model_len or cfg.block_size)
        if not 1 < self.max_model_len <= cfg.block_size:
            raise _fail(f"Engine: max_model_len must lie in [2, {cfg.block_size}] (the model's "
                        f"block_size), got {max_model_len}")
        self.model, self.tokenizer = model, tokenizer
        self.model_name = model_name or getattr(model, "name", None) or (
            getattr(tokenizer, "name", None) if tokenizer is not None else None) or "gpt"
        self.model_name = str(self.model_name)
        self.vocab_size = cfg.vocab_size
        dtype = model.transformer.wte.weight.detach().numpy().dtype
        n = pool_num_blocks(model, block_size, num_blocks=num_blocks,
                            kv_cache_memory=kv_cache_memory, max_num_seqs=max_num_seqs,
                            max_model_len=self.max_model_len, kv_dtype=kv_dtype, dtype=dtype)
        self.pool = KVPool(model, n, block_size, kv_dtype=kv_dtype, dtype=dtype,
                           enable_prefix_caching=enable_prefix_caching)
        if not enable_chunked_prefill:  # a whole prompt must fit one step's budget
            max_num_batched_tokens = max(max_num_batched_tokens, self.max_model_len)
        self.scheduler = Scheduler(self.pool, max_num_seqs, max_num_batched_tokens,
                                   enable_chunked_prefill)
        self.runner = ModelRunner(model, self.pool)
        # the prefill cap while decodes run: fixed, or adapted step by step (see step())
        self._fixed_cap = max_prefill_tokens_per_step if enable_chunked_prefill else None
        self._adaptive = enable_chunked_prefill and max_prefill_tokens_per_step is None
        self._latency_budget = float(prefill_latency_budget)
        self._cap = 2 * block_size  # the first capped chunks: small, then grown
        # recent decode-only steps per batch size: model time, and the whole cycle from one
        # step's start to the next (schedule, sampling, outputs, and the server's sending);
        # medians, so one step the OS preempted does not move the budget
        self._decode_s: dict[int, _Recent] = {}
        self._cycle_s: dict[int, _Recent] = {}
        self._prev: tuple[float, int] | None = None  # the last step's start and decodes,
        # if it ran decodes only
        self.scheduler.prefill_cap = self._fixed_cap
        self.rng = np.random.default_rng(seed)
        self.requests: dict[str, _Request] = {}
        self._ids = itertools.count()
        self._seq_ids = itertools.count()
        self.eos_token_id = getattr(tokenizer, "eos_token_id", None)
        self.step_count = 0
        self.num_generated = 0
        self.times = dict.fromkeys(("model", "schedule", "sample", "output"), 0.0)

    # ---- requests ------------------------------------------------------------------------
    def _encode(self, prompt) -> tuple[str | None, list[int]]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise _fail("Engine has no tokenizer: pass the prompt as a list of token ids")
            return prompt, list(self.tokenizer.encode(prompt))
        if isinstance(prompt, np.ndarray):
            prompt = prompt.tolist()
        if not isinstance(prompt, _Seq) or not all(
                isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in prompt):
            raise _fail(f"prompt must be a str or a list of token ids, got "
                        f"{type(prompt).__name__}")
        ids = [int(t) for t in prompt]
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise _fail(f"token id {bad[0]} is outside the vocabulary [0, {self.vocab_size})")
        return None, ids

    def add_request(self, prompt: str | list[int], params: SamplingParams | None = None,
                    request_id: str | None = None) -> str:
        """Queue a prompt; returns its request id. Too long a prompt, an unknown character
        or token, or a request the whole pool could not hold is an ArgumentError."""
        params = SamplingParams() if params is None else params
        if not isinstance(params, SamplingParams):
            raise _fail(f"params must be a SamplingParams, got {type(params).__name__}")
        request_id = str(next(self._ids)) if request_id is None else str(request_id)
        if request_id in self.requests:
            raise _fail(f"request id {request_id!r} is already in use")
        text, ids = self._encode(prompt)
        P, M = len(ids), self.max_model_len
        if P == 0:
            raise _fail("the prompt is empty: at least one token is needed")
        if P >= M:
            raise _fail(f"this model's maximum context length is {M} tokens; the prompt has "
                        f"{P}, which leaves no room for a completion")
        total = M if params.max_tokens is None else min(M, P + params.max_tokens)
        need = -(-total // self.pool.block_size)
        if need > self.pool.num_blocks:
            raise _fail(f"a request of {total} tokens needs {need} KV blocks but the pool has "
                        f"{self.pool.num_blocks}; raise num_blocks / kv_cache_memory")
        metrics = RequestMetrics(arrival_time=time.perf_counter())
        req = _Request(request_id, text, ids, params, metrics)
        for i in range(params.n):
            seq = Sequence(next(self._seq_ids), req, i, list(ids), P,
                           make_rng(params, i, self.rng))
            seq.prefix_offset = max(P - 5, 0)  # a little context: BPE spaces decode right
            req.seqs.append(seq)
            if i:
                seq.status = PENDING
        self.scheduler.add(req.seqs[0])
        self.requests[request_id] = req
        return request_id

    def abort(self, request_id: str) -> None:
        """Drop a request and give its blocks back; an unknown id is a no-op."""
        req = self.requests.pop(str(request_id), None)
        if req is None:
            return
        for seq in req.seqs:
            if seq.status in (RUNNING, WAITING):
                self.scheduler.free(seq)
            seq.status = FINISHED
            if seq.finish_reason is None:
                seq.finish_reason = "abort"

    def has_unfinished(self) -> bool:
        return bool(self.requests)

    # ---- one step ------------------------------------------------------------------------
    @no_grad()
    def step(self) -> list[RequestOutput]:
        """One scheduler iteration; a RequestOutput for each request that moved or finished."""
        t0 = time.perf_counter()
        sch = self.scheduler
        if self._prev is not None:  # the last step ran decodes only: its whole cycle
            _recent(self._cycle_s, self._prev[1]).add(t0 - self._prev[0])
            self._prev = None
        if self._adaptive:  # uncapped until a decode-only step of this many says their cost
            known = sum(1 for s in sch.running if len(s.tokens) - s.num_computed == 1)
            sch.prefill_cap = self._cap if known in self._decode_s else None
        chunks = sch.schedule()
        t1 = time.perf_counter()
        if not chunks and self.scheduler.waiting and not self.scheduler.running:
            # add_request guarantees one request fits an idle pool: this is a bug, not load
            raise ShapeflowError(f"serve: the scheduler admitted nothing with an idle pool "
                                 f"({self.pool.num_free} of {self.pool.num_blocks} blocks "
                                 f"free, {len(self.scheduler.waiting)} waiting)", op="serve")
        for c in chunks:
            m = c.seq.request.metrics
            if m.first_scheduled_time is None:
                m.first_scheduled_time = t1
        logits = self.runner.run(chunks) if chunks else None
        t2 = time.perf_counter()
        if self._adaptive and sch.last_decodes:
            self._adapt(t0, t2 - t1)
        self.scheduler.commit(chunks)
        t3 = time.perf_counter()
        seqs, rows = [], []
        for row, c in enumerate([c for c in chunks if c.need_logits]):  # logits: one row each
            seq = c.seq
            req = seq.request
            seqs.append(seq)
            rows.append(row)
            if len(req.seqs) > 1 and not req.forked:  # n > 1: the siblings share the prompt
                req.forked = True
                for child in req.seqs[1:]:
                    self.scheduler.fork(seq, child)
                    seqs.append(child)
                    rows.append(row)
        touched: dict[str, _Request] = {}
        if seqs:
            lg = logits[rows] if len(rows) != len(logits) else logits
            toks = sample(lg, [s.request.params for s in seqs], [s.rng for s in seqs])
            t4 = time.perf_counter()
            now = t4
            for seq, tok in zip(seqs, toks):
                self._append(seq, tok)
                req = seq.request
                touched[req.request_id] = req
                if req.metrics.first_token_time is None:
                    req.metrics.first_token_time = now
        else:
            t4 = time.perf_counter()
        outputs = [self._output(req) for req in touched.values()]
        t5 = time.perf_counter()
        self.step_count += 1
        tm = self.times
        tm["schedule"] += (t1 - t0) + (t3 - t2)
        tm["model"] += t2 - t1
        tm["sample"] += t4 - t3
        tm["output"] += t5 - t4
        return outputs

    def _adapt(self, t0: float, model_s: float) -> None:
        """Learn from a step that ran decodes: their cost alone, or the next prefill cap.

        The decodes' inter-token latency is a whole cycle (the model, this engine's own
        work, and a server's sending): a step's prefill may add `prefill_latency_budget`
        times that to the model's time."""
        sch = self.scheduler
        b = sch.last_decodes
        if not sch.last_prefill:
            _recent(self._decode_s, b).add(model_s)
            self._prev = t0, b
            return
        if b not in self._decode_s:
            return
        decode = self._decode_s[b].median()
        cycle = self._cycle_s[b].median() if b in self._cycle_s else None
        goal = self._latency_budget * (cycle or decode)
        extra = model_s - decode
        if sch.last_capped or extra > goal:
            # down to one token: the prompt still gets about budget / (1 + budget) of the
            # time while decodes run, and all of it once they finish
            self._cap = next_prefill_cap(sch.last_prefill, extra, goal, 1,
                                         sch.max_num_batched_tokens)

    def _append(self, seq: Sequence, tok: int) -> None:
        """Add a sampled token: stop checks, incremental text, what may be sent now."""
        params = seq.request.params
        seq.tokens.append(tok)
        seq.delta_ids.append(tok)
        self.num_generated += 1
        if tok == self.eos_token_id and not params.ignore_eos:
            seq.finish_reason = "stop"
        elif tok in params.stop_token_ids:
            seq.finish_reason, seq.stop_reason = "stop", tok
        elif self.tokenizer is not None:
            before = len(seq.text)
            seq.text += self._detok(seq)
            if params.stop:
                longest = max(len(s) for s in params.stop)
                start = max(0, before - longest + 1)
                hit = min(((i, s) for s in params.stop if (i := seq.text.find(s, start)) >= 0),
                          default=None)
                if hit is not None:
                    seq.text = seq.text[:hit[0]]
                    seq.finish_reason, seq.stop_reason = "stop", hit[1]
        n_out = len(seq.tokens) - seq.prompt_len
        if seq.finish_reason is None and (
                (params.max_tokens is not None and n_out >= params.max_tokens)
                or len(seq.tokens) >= self.max_model_len):
            seq.finish_reason = "length"
        if seq.finish_reason is not None:
            self.scheduler.free(seq)
            seq.held = 0
        elif params.stop:
            seq.held = _held_back(seq.text, params.stop)

    def _detok(self, seq: Sequence) -> str:
        """The text the newest token adds; "" while it ends inside a multi-byte character."""
        ids, tok = seq.tokens, self.tokenizer
        prefix = tok.decode(ids[seq.prefix_offset:seq.read_offset])
        new = tok.decode(ids[seq.prefix_offset:])
        if len(new) > len(prefix) and not new.endswith("\ufffd"):
            seq.prefix_offset, seq.read_offset = seq.read_offset, len(ids)
            return new[len(prefix):]
        return ""

    def _output(self, req: _Request) -> RequestOutput:
        outs = []
        for seq in req.seqs:
            upto = len(seq.text) - seq.held
            delta = seq.text[seq.sent:upto] if upto > seq.sent else ""
            seq.sent = max(seq.sent, upto)
            outs.append(CompletionOutput(
                index=seq.index, text=seq.text[:seq.sent], token_ids=seq.tokens[seq.prompt_len:],
                finish_reason=seq.finish_reason, stop_reason=seq.stop_reason, delta_text=delta,
                delta_token_ids=seq.delta_ids))
            seq.delta_ids = []
        finished = all(s.finish_reason is not None for s in req.seqs)
        m = req.metrics
        m.num_cached_tokens = req.seqs[0].num_cached
        if finished and not req.finished:
            req.finished = True
            m.finished_time = time.perf_counter()
            self.requests.pop(req.request_id, None)
        return RequestOutput(req.request_id, req.prompt, req.prompt_ids, outs, finished,
                             RequestMetrics(**vars(m)))

    # ---- offline -------------------------------------------------------------------------
    def generate(self, prompts, sampling_params=None) -> list[RequestOutput]:
        """Run prompts to completion; their final RequestOutputs in prompt order.

        `prompts`: a str, a list of token ids, or a list of either; `sampling_params`: one
        SamplingParams for all or a list, one per prompt.
        """
        if isinstance(prompts, str) or (isinstance(prompts, _Seq) and prompts and all(
                isinstance(t, (int, np.integer)) for t in prompts)):
            prompts = [prompts]
        prompts = list(prompts)
        if isinstance(sampling_params, _Seq):
            params = list(sampling_params)
            if len(params) != len(prompts):
                raise _fail(f"generate: {len(params)} sampling params for {len(prompts)} "
                            "prompts")
        else:
            params = [sampling_params] * len(prompts)
        ids = []
        try:
            for p, sp in zip(prompts, params):
                ids.append(self.add_request(p, sp))
        except BaseException:
            for rid in ids:
                self.abort(rid)
            raise
        final: dict[str, RequestOutput] = {}
        want = set(ids)
        try:
            while want - final.keys():
                for out in self.step():
                    if out.finished and out.request_id in want:
                        final[out.request_id] = out
        except BaseException:
            for rid in ids:
                self.abort(rid)
            raise
        return [final[rid] for rid in ids]

    # ---- numbers -------------------------------------------------------------------------
    @contextlib.contextmanager
    def uncapped_prefill(self):
        """Inside, prefill chunks are bounded by the token budget alone, not by the decodes'
        latency (a calibration run wants its batch of prompts in decode together)."""
        saved = self._adaptive, self._fixed_cap
        self._adaptive, self._fixed_cap = False, None
        self.scheduler.prefill_cap = None
        try:
            yield self
        finally:
            self._adaptive, self._fixed_cap = saved
            self.scheduler.prefill_cap = self._fixed_cap

    def stats(self) -> dict:
        """Queue lengths, pool use, prefix-cache counters, preemptions and span timing."""
        sch, pool = self.scheduler, self.pool
        running = {s.request.request_id for s in sch.running}
        waiting = {s.request.request_id for s in sch.waiting} - running
        tm = self.times
        return {
            "num_running": len(running), "num_waiting": len(waiting),
            "num_running_seqs": len(sch.running), "num_waiting_seqs": len(sch.waiting),
            "kv_blocks_total": pool.num_blocks, "kv_blocks_used": pool.num_used,
            "kv_blocks_free": pool.num_free, "kv_blocks_cached": len(pool.evictable),
            "kv_block_size": pool.block_size, "kv_bytes_total": pool.nbytes,
            "kv_bytes_used": pool.bytes_used, "kv_bytes_written": self.runner.kv_bytes_written,
            "prefix_cache_queries": pool.queries, "prefix_cache_hits": pool.hits,
            "prefix_cache_evictions": pool.evictions, "num_preemptions": sch.num_preemptions,
            "step_count": self.step_count, "num_generated_tokens": self.num_generated,
            "time_model_s": tm["model"], "time_schedule_s": tm["schedule"],
            "time_sample_s": tm["sample"], "time_output_s": tm["output"],
            "prefill_cap": self._cap if self._adaptive else self._fixed_cap,
        }


def _recent(table: dict, key: int) -> _Recent:
    if key not in table:
        table[key] = _Recent()
    return table[key]


class _Recent:
    """The last few values of a measured time, and their median."""

    __slots__ = ("values", "_median")

    def __init__(self, n: int = 9) -> None:
        self.values: deque[float] = deque(maxlen=n)
        self._median: float | None = None

    def add(self, x: float) -> None:
        self.values.append(x)
        self._median = None

    def median(self) -> float | None:
        if self._median is None and self.values:
            v = sorted(self.values)
            self._median = v[len(v) // 2]
        return self._median


def _held_back(text: str, stops: list[str]) -> int:
    """Chars at the end of text that could still grow into a stop string."""
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), hold, -1):
            if text.endswith(s[:k]):
                hold = k
                break
    return hold
