"""The paged KV pool: fixed-size blocks per layer, reference counts, and a prefix cache.

A block holds `block_size` tokens' keys and values in every layer. Sequences own lists of
block ids (block tables); a full block is named by a hash chain (its parent block's hash and
its own token ids), so a later prompt with the same prefix finds and shares it (refcount).
Blocks nobody holds but that carry a hash stay cached, and are evicted least recently freed
first, only when a fresh block is needed.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..errors import ArgumentError

__all__ = ["KVPool", "NoFreeBlocks", "block_bytes", "pool_num_blocks"]

QUANTIZED = ("int8", "fp8-e4m3", "fp8-e5m2")
DEFAULT_KV_MEMORY = 1 << 30  # bytes a pool takes when neither num_blocks nor memory is given


class NoFreeBlocks(Exception):
    """Internal: the pool has no free or evictable block left (the scheduler preempts)."""


def _geometry(model) -> tuple[int, int, int]:
    c = model.config
    return c.n_layer, c.n_head, c.n_embd // c.n_head


def block_bytes(model, block_size: int, kv_dtype: str | None = None,
                dtype=np.float32) -> int:
    """Bytes one block takes over all layers (keys and values): `kv_cache_bytes` of
    block_size tokens, so whole blocks are what `sf.memory.kv_cache_bytes` counts."""
    from ..inspect.memory.kv import kv_cache_bytes

    if kv_dtype is not None:
        return kv_cache_bytes(model, 1, block_size, dtype=kv_dtype)
    return kv_cache_bytes(model, 1, block_size, dtype=np.dtype(dtype).name)


def pool_num_blocks(model, block_size: int, *, num_blocks: int | None = None,
                    kv_cache_memory: int | None = None, max_num_seqs: int = 64,
                    max_model_len: int | None = None, kv_dtype: str | None = None,
                    dtype=np.float32) -> int:
    """How many blocks an Engine with these settings allocates (the plan uses this too).

    `num_blocks` wins; else `kv_cache_memory` bytes; else room for max_num_seqs full-length
    sequences, capped at 1 GiB but never below one full-length sequence.
    """
    per = block_bytes(model, block_size, kv_dtype, dtype)
    max_len = max_model_len or model.config.block_size
    per_seq = -(-max_len // block_size)
    if num_blocks is not None:
        n = int(num_blocks)
    elif kv_cache_memory is not None:
        n = int(kv_cache_memory) // per
    else:
        n = max(per_seq, min(max_num_seqs * per_seq, DEFAULT_KV_MEMORY // per))
    if n < 1:
        raise ArgumentError(f"the KV pool needs at least one block of {per} bytes "
                            f"(num_blocks={num_blocks}, kv_cache_memory={kv_cache_memory})",
                            op="serve")
    return n


class KVPool:
    """Per-layer key/value block arrays plus the allocator and the prefix cache.

    `k_caches[l]`, `v_caches[l]`: `[num_blocks, n_head, block_size, head_dim]` (float), or the
    KERNEL helper's quantized block storage where `kv_dtype` names an int8 / fp8 format.
    """

    def __init__(self, model, num_blocks: int, block_size: int = 16,
                 kv_dtype: str | None = None, dtype=np.float32,
                 enable_prefix_caching: bool = True) -> None:
        if block_size < 1:
            raise ArgumentError(f"block_size must be >= 1, got {block_size}", op="serve")
        n_layer, n_head, head_dim = _geometry(model)
        self.num_blocks, self.block_size = int(num_blocks), int(block_size)
        self.kv_dtype, self.dtype = kv_dtype, np.dtype(dtype)
        self.enable_prefix_caching = enable_prefix_caching
        self.block_nbytes = block_bytes(model, block_size, kv_dtype, dtype)
        shape = (self.num_blocks, n_head, self.block_size, head_dim)
        if kv_dtype is None:
            # np.zeros maps pages lazily: a big pool costs memory only where tokens land
            self.k_caches = [np.zeros(shape, self.dtype) for _ in range(n_layer)]
            self.v_caches = [np.zeros(shape, self.dtype) for _ in range(n_layer)]
        else:
            from . import kv_quant

            self.k_caches = [kv_quant.QuantizedBlocks(shape, kv_dtype) for _ in range(n_layer)]
            self.v_caches = [kv_quant.QuantizedBlocks(shape, kv_dtype) for _ in range(n_layer)]
        self.ref = [0] * self.num_blocks
        self.free: list[int] = list(range(self.num_blocks - 1, -1, -1))  # pop() gives 0 first
        self.evictable: OrderedDict[int, None] = OrderedDict()  # ref 0, hashed; oldest first
        self.block_hash: list[int | None] = [None] * self.num_blocks
        self.block_tokens: list[tuple | None] = [None] * self.num_blocks
        self.block_parent: list[int | None] = [None] * self.num_blocks
        self.hash_to_block: dict[int, int] = {}
        self.children: dict[int | None, set[int]] = {}  # parent hash -> cached child blocks
        self.queries = self.hits = self.evictions = 0

    # ---- the allocator -------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """Blocks a request can get now: never used or only cached (evictable)."""
        return len(self.free) + len(self.evictable)

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.num_free

    @property
    def nbytes(self) -> int:
        """Bytes the pool allocated (all blocks, all layers)."""
        return self.num_blocks * self.block_nbytes

    @property
    def bytes_used(self) -> int:
        """Bytes of the blocks live sequences hold."""
        return self.num_used * self.block_nbytes

    def allocate(self) -> int:
        """A fresh block (refcount 1): a never-used one, else the least recently freed cached
        one, whose hash is dropped. Raises NoFreeBlocks when neither exists."""
        if self.free:
            b = self.free.pop()
        elif self.evictable:
            b, _ = self.evictable.popitem(last=False)
            self._drop_hash(b)
            self.evictions += 1
        else:
            raise NoFreeBlocks
        self.ref[b] = 1
        return b

    def release(self, blocks: list[int]) -> None:
        """Drop one reference to each block; a block at 0 goes back (cached if hashed).
        Freed in reverse, so a sequence's tail is evicted before its shared prefix."""
        for b in reversed(blocks):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                if self.block_hash[b] is not None:
                    self.evictable[b] = None
                else:
                    self.free.append(b)

    def share(self, b: int) -> None:
        """One more reference to block b (a cached block leaves the evictable list)."""
        if self.ref[b] == 0:
            self.evictable.pop(b, None)
        self.ref[b] += 1

    def copy_rows(self, src: int, dst: int, rows: int) -> None:
        """Copy the first `rows` token rows of block src into block dst, every layer."""
        for caches in (self.k_caches, self.v_caches):
            for c in caches:
                c[dst, :, :rows] = c[src, :, :rows]

    # ---- the prefix cache ----------------------------------------------------------------
    @staticmethod
    def chain_hash(parent: int | None, tokens: tuple) -> int:
        return hash((parent, tokens))

    def _drop_hash(self, b: int) -> None:
        h = self.block_hash[b]
        if h is None:
            return
        if self.hash_to_block.get(h) == b:
            del self.hash_to_block[h]
        kids = self.children.get(self.block_parent[b])
        if kids is not None:
            kids.discard(b)
            if not kids:
                del self.children[self.block_parent[b]]
        self.block_hash[b] = self.block_tokens[b] = self.block_parent[b] = None

    def register(self, b: int, parent: int | None, tokens: tuple) -> int:
        """Name full block b by (parent hash, tokens); returns its hash. A block with the same
        content already cached keeps the name (b then stays private)."""
        h = self.chain_hash(parent, tokens)
        if not self.enable_prefix_caching or h in self.hash_to_block:
            return h
        self.hash_to_block[h] = b
        self.block_hash[b], self.block_tokens[b], self.block_parent[b] = h, tokens, parent
        self.children.setdefault(parent, set()).add(b)
        return h

    def lookup(self, parent: int | None, tokens: tuple) -> int | None:
        b = self.hash_to_block.get(self.chain_hash(parent, tokens))
        if b is None or self.block_tokens[b] != tokens or self.block_parent[b] != parent:
            return None  # a hash collision is a miss, never someone else's keys
        return b

    def match_prefix(self, token_ids: list[int], limit: int
                     ) -> tuple[list[int], list[int], int, int | None]:
        """Cached blocks for the first tokens of token_ids (at most `limit` tokens).

        Returns (full blocks, their hashes, tokens found, partial-block source): whole blocks
        are shared (refcount taken here); where the match goes on inside a cached block, that
        block's id is returned and the caller copies its first rows into a fresh block. The
        caller counts queries and hits once the request is admitted.
        """
        bs = self.block_size
        if not self.enable_prefix_caching or limit <= 0:
            return [], [], 0, None
        blocks, hashes, parent = [], [], None
        n = 0
        while n + bs <= limit:
            tokens = tuple(token_ids[n:n + bs])
            b = self.lookup(parent, tokens)
            if b is None:
                break
            self.share(b)
            blocks.append(b)
            parent = self.block_hash[b]
            hashes.append(parent)
            n += bs
        # token granularity: the longest common start among the cached children
        best, best_k = None, 0
        want = token_ids[n:min(n + bs, limit)]
        for c in self.children.get(parent, ()):
            toks = self.block_tokens[c]
            k = 0
            while k < len(want) and toks[k] == want[k]:
                k += 1
            if k > best_k:
                best, best_k = c, k
        return blocks, hashes, n + best_k, best
