"""Iteration-level (continuous) batching over a paged KV pool.

Each step the scheduler picks, within a token budget: one token for every running sequence
in decode, then the next chunk of sequences still prefilling, then new sequences from the
waiting queue (first come, first served). When the pool runs out of blocks, the newest
running sequence is preempted by recompute: its blocks go back, it returns to the front of
the waiting queue with its generated tokens kept, and is prefilled again later (its own
blocks, still in the prefix cache, usually make that cheap).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .kv_pool import KVPool, NoFreeBlocks

__all__ = ["Chunk", "Scheduler", "Sequence", "next_prefill_cap"]

WAITING, RUNNING, FINISHED = "waiting", "running", "finished"


class Sequence:
    """One completion's tokens (prompt + generated) and where its keys and values live."""

    __slots__ = ("seq_id", "request", "index", "tokens", "prompt_len", "num_computed",
                 "block_table", "block_hashes", "status", "rng", "text", "sent", "held",
                 "prefix_offset", "read_offset", "finish_reason", "stop_reason", "delta_ids",
                 "num_cached")

    def __init__(self, seq_id: int, request, index: int, tokens: list[int], prompt_len: int,
                 rng=None) -> None:
        self.seq_id, self.request, self.index = seq_id, request, index
        self.tokens, self.prompt_len = tokens, prompt_len
        self.num_computed = 0  # tokens whose keys and values are in the pool
        self.block_table: list[int] = []
        self.block_hashes: list[int] = []  # hash chain of the full blocks, in order
        self.status = WAITING
        self.rng = rng
        # detokenization: text so far, chars already sent, incremental-decode offsets
        self.text, self.sent, self.held = "", 0, 0
        self.prefix_offset = self.read_offset = prompt_len
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None
        self.delta_ids: list[int] = []
        self.num_cached = 0

    @property
    def output_ids(self) -> list[int]:
        return self.tokens[self.prompt_len:]

    def __repr__(self) -> str:
        return (f"Sequence({self.seq_id}, tokens={len(self.tokens)}, "
                f"computed={self.num_computed}, blocks={len(self.block_table)}, {self.status})")


@dataclass
class Chunk:
    """Run tokens[start:start + num_tokens] of seq this step; logits when it reaches the end."""

    seq: Sequence
    start: int
    num_tokens: int

    @property
    def need_logits(self) -> bool:
        return self.start + self.num_tokens == len(self.seq.tokens)


class Scheduler:
    """Chooses each step's chunks; owns the waiting queue and the running list."""

    def __init__(self, pool: KVPool, max_num_seqs: int = 64, max_num_batched_tokens: int = 512,
                 enable_chunked_prefill: bool = True) -> None:
        self.pool = pool
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.chunked = enable_chunked_prefill
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self._scheduled: dict[Sequence, int] = {}
        self._budget = 0
        # prefill tokens a step may add to running decodes (None: the whole budget), so the
        # decodes' inter-token latency stays near a decode step's; the engine sets it
        self.prefill_cap: int | None = None
        self.last_decodes = self.last_prefill = 0  # what the last schedule() picked
        self.last_capped = False  # ...and whether prefill_cap, not the prompts, bounded it

    def add(self, seq: Sequence, front: bool = False) -> None:
        seq.status = WAITING
        if front:
            self.waiting.appendleft(seq)
        else:
            self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def free(self, seq: Sequence) -> None:
        """Take seq out of the queues and give its blocks back (finish or abort)."""
        if seq.status == RUNNING:
            self.running.remove(seq)
        elif seq.status == WAITING and seq in self.waiting:
            self.waiting.remove(seq)
        self._release(seq)
        seq.status = FINISHED

    def _release(self, seq: Sequence) -> None:
        self.pool.release(seq.block_table)
        seq.block_table, seq.block_hashes, seq.num_computed = [], [], 0

    # ---- one step ------------------------------------------------------------------------
    def schedule(self) -> list[Chunk]:
        """This step's chunks: decodes first, then running prefills, then new sequences."""
        self._scheduled = sched = {}
        self._budget = self.max_num_batched_tokens
        preempted: set[Sequence] = set()
        decodes = 0
        for decode in (True, False):
            if not decode:
                decodes = len(sched)
                if decodes and self.prefill_cap is not None:
                    self._budget = min(self._budget, self.prefill_cap)
                prefill_budget = self._budget
            for seq in list(self.running):
                if seq.status != RUNNING or seq in sched:
                    continue
                remaining = len(seq.tokens) - seq.num_computed
                if (remaining == 1) != decode:
                    continue
                n = min(remaining, self._budget)
                if n <= 0 or (n < remaining and not self.chunked):
                    continue
                if self._grow(seq, seq.num_computed + n, preempted):
                    sched[seq] = n
                    self._budget -= n
        while self.waiting and self._budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if seq in preempted or not self._admit(seq):
                break
        self.last_decodes = decodes
        self.last_prefill = max(prefill_budget - self._budget, 0)
        self.last_capped = self._budget <= 0 and prefill_budget == self.prefill_cap
        return [Chunk(s, s.num_computed, n) for s, n in sched.items()]

    def _grow(self, seq: Sequence, upto: int, preempted: set) -> bool:
        """Blocks for seq's first `upto` tokens, preempting the newest running sequences while
        the pool is short; False when seq itself had to go."""
        need = -(-upto // self.pool.block_size) - len(seq.block_table)
        while self.pool.num_free < need:
            victim = self.running[-1]
            self._preempt(victim)
            preempted.add(victim)
            if victim is seq:
                return False
        for _ in range(need):
            seq.block_table.append(self.pool.allocate())
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        n = self._scheduled.pop(seq, 0)
        self._budget += n
        self._release(seq)
        self.add(seq, front=True)
        self.num_preemptions += 1

    def _admit(self, seq: Sequence) -> bool:
        """Move the head of the waiting queue to running with its first chunk, reusing the
        prefix cache; False (nothing held) when the pool cannot take the chunk now."""
        pool, bs = self.pool, self.pool.block_size
        found = 0
        if not seq.block_table:
            blocks, hashes, found, src = pool.match_prefix(seq.tokens, len(seq.tokens) - 1)
            seq.block_table, seq.block_hashes = blocks, hashes
            if src is not None:
                pool.share(src)  # so that allocating the copy cannot evict the source
                try:
                    b = pool.allocate()
                except NoFreeBlocks:
                    found = len(blocks) * bs
                else:
                    pool.copy_rows(src, b, found - len(blocks) * bs)
                    seq.block_table.append(b)
                pool.release([src])
            seq.num_computed = found
        remaining = len(seq.tokens) - seq.num_computed
        n = min(remaining, self._budget)
        need = -(-(seq.num_computed + n) // bs) - len(seq.block_table)
        if (n < remaining and not self.chunked) or pool.num_free < need:
            self._release(seq)
            return False
        for _ in range(need):
            seq.block_table.append(pool.allocate())
        pool.queries += len(seq.tokens)
        pool.hits += found
        seq.num_cached = max(seq.num_cached, found)
        self.waiting.popleft()
        seq.status = RUNNING
        self.running.append(seq)
        self._scheduled[seq] = n
        self._budget -= n
        return True

    def commit(self, chunks: list[Chunk]) -> None:
        """After the model ran: count the chunks' tokens as computed, name full blocks."""
        pool, bs = self.pool, self.pool.block_size
        caching = pool.enable_prefix_caching
        for c in chunks:
            seq = c.seq
            seq.num_computed = c.start + c.num_tokens
            if not caching:
                continue
            hashes = seq.block_hashes
            while len(hashes) < seq.num_computed // bs:
                i = len(hashes)
                hashes.append(pool.register(seq.block_table[i], hashes[-1] if hashes else None,
                                            tuple(seq.tokens[i * bs:(i + 1) * bs])))

    def fork(self, parent: Sequence, child: Sequence) -> None:
        """Start child on parent's computed prompt: full blocks shared, the last partial block
        copied (the two append different tokens). No block free: the child waits and is
        prefilled again from the prefix cache."""
        pool, bs = self.pool, self.pool.block_size
        n = parent.num_computed
        full, rows = divmod(n, bs)
        if len(self.running) < self.max_num_seqs and (rows == 0 or pool.num_free > 0):
            for b in parent.block_table[:full]:
                pool.share(b)
            child.block_table = parent.block_table[:full]
            if rows:
                b = pool.allocate()
                pool.copy_rows(parent.block_table[full], b, rows)
                child.block_table.append(b)
            child.block_hashes = list(parent.block_hashes[:full])
            child.num_computed = n
            child.status = RUNNING
            self.running.append(child)
        else:
            self.add(child)


def next_prefill_cap(tokens: int, extra_s: float, goal_s: float, lo: int, hi: int) -> int:
    """The prefill tokens for the next step that runs decodes, from the last such step:
    its `tokens` prompt tokens added `extra_s` to the decodes' time, `goal_s` is allowed.
    Proportional (attention makes a token's cost grow with its context): down at once to
    1/16 (an overshoot is a late token for every decode), up at most double, within
    [lo, hi]."""
    f = min(max(goal_s / max(extra_s, 1e-9), 1 / 16), 2.0)
    return int(min(max(tokens * f, lo), hi))
