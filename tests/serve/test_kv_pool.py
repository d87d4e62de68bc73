"""The paged KV pool: allocator, reference counts, the prefix cache's hash chain, LRU eviction."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import shapeflow as sf
from shapeflow.models.gpt import GPTConfig
from shapeflow.serve.kv_pool import KVPool, NoFreeBlocks, block_bytes, pool_num_blocks

MODEL = SimpleNamespace(config=GPTConfig(vocab_size=50, block_size=64, n_layer=3, n_head=2,
                                         n_embd=16))


def chain(pool: KVPool, tokens: list[int]) -> list[int]:
    """Allocate and name the full blocks of tokens, as the scheduler does after a prefill."""
    bs, parent, blocks = pool.block_size, None, []
    for i in range(0, len(tokens) - bs + 1, bs):
        b = pool.allocate()
        parent = pool.register(b, parent, tuple(tokens[i:i + bs]))
        blocks.append(b)
    return blocks


def test_allocator_and_refcounts():
    pool = KVPool(MODEL, num_blocks=4, block_size=4)
    got = [pool.allocate() for _ in range(4)]
    assert sorted(got) == [0, 1, 2, 3] and pool.num_free == 0
    with pytest.raises(NoFreeBlocks):
        pool.allocate()
    pool.share(got[0])
    pool.release([got[0]])
    assert pool.num_used == 4  # still held by its first owner
    pool.release(got)
    assert pool.num_free == 4 and pool.num_used == 0


def test_bytes_are_kv_cache_bytes():
    pool = KVPool(MODEL, num_blocks=10, block_size=8)
    per_block = sf.memory.kv_cache_bytes(MODEL, 1, 8, dtype="float32")
    arrays = sum(a.nbytes for a in pool.k_caches + pool.v_caches)
    assert pool.nbytes == arrays == 10 * per_block == 10 * block_bytes(MODEL, 8)
    assert pool.k_caches[0].shape == (10, 2, 8, 8) and len(pool.v_caches) == 3
    a, b = pool.allocate(), pool.allocate()
    assert pool.bytes_used == 2 * per_block
    pool.release([a, b])
    q = KVPool(MODEL, num_blocks=10, block_size=8, kv_dtype="int8")
    arrays = sum(c.nbytes for c in q.k_caches + q.v_caches)
    assert q.nbytes == arrays == sf.memory.kv_cache_bytes(MODEL, 1, 80, dtype="int8")


def test_pool_size_from_memory_and_defaults():
    per = block_bytes(MODEL, 16)
    assert pool_num_blocks(MODEL, 16, num_blocks=7) == 7
    assert pool_num_blocks(MODEL, 16, kv_cache_memory=10 * per + per // 2) == 10
    # default: max_num_seqs full-length (64-token) sequences
    assert pool_num_blocks(MODEL, 16, max_num_seqs=3) == 3 * 4
    with pytest.raises(sf.errors.ArgumentError):
        pool_num_blocks(MODEL, 16, kv_cache_memory=per - 1)


def test_prefix_match_follows_the_hash_chain():
    pool = KVPool(MODEL, num_blocks=16, block_size=4)
    a = list(range(12))
    blocks = chain(pool, a)
    got, hashes, n, src = pool.match_prefix(a + [40, 41], limit=13)
    assert got == blocks and n == 12 and src is None and len(hashes) == 3
    assert all(pool.ref[b] == 2 for b in blocks)  # shared, not copied
    pool.release(got)
    # the same second block after a different first block is a different block
    b = [9, 9, 9, 9] + a[4:12]
    got, _, n, _ = pool.match_prefix(b, limit=len(b))
    assert got == [] and n == 0


def test_match_inside_a_block_names_the_block_to_copy():
    pool = KVPool(MODEL, num_blocks=16, block_size=4)
    blocks = chain(pool, list(range(8)))
    got, _, n, src = pool.match_prefix([0, 1, 2, 3, 4, 5, 30, 31], limit=7)
    assert got == blocks[:1] and n == 6 and src == blocks[1]  # 4 shared + 2 rows to copy
    dst = pool.allocate()
    for c in pool.k_caches:
        c[src] = np.arange(c[src].size, dtype=np.float32).reshape(c[src].shape)
    pool.copy_rows(src, dst, 2)
    for c in pool.k_caches:
        np.testing.assert_array_equal(c[dst, :, :2], c[src, :, :2])
        assert not c[dst, :, 2:].any()
    # the limit keeps at least the last token out of the match
    _, _, n, _ = pool.match_prefix(list(range(8)), limit=7)
    assert n == 7


def test_freed_named_blocks_stay_cached_and_are_evicted_least_recent_first():
    pool = KVPool(MODEL, num_blocks=6, block_size=2)
    seqs = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    held = [chain(pool, s) for s in seqs]
    for h in held:  # freed in order: the first sequence is the least recently used
        pool.release(h)
    assert pool.num_free == 6 and len(pool.evictable) == 6
    x = pool.allocate()
    y = pool.allocate()  # a fresh block evicts the oldest cached ones first
    assert pool.evictions == 2 and {x, y} == set(held[0])
    for s, want in zip(seqs, (0, 4, 4)):
        got, _, n, _ = pool.match_prefix(s + [0], limit=4)
        assert n == want
        pool.release(got)
    # a hit refreshes: the second sequence, touched last, now outlives the third
    got, _, _, _ = pool.match_prefix(seqs[1] + [0], limit=4)
    pool.release(got)
    pool.allocate()
    pool.allocate()
    assert pool.match_prefix(seqs[1] + [0], limit=4)[2] == 4
    assert pool.match_prefix(seqs[2] + [0], limit=4)[2] == 0


def test_a_hash_collision_is_a_miss(monkeypatch):
    pool = KVPool(MODEL, num_blocks=8, block_size=2)
    monkeypatch.setattr(KVPool, "chain_hash", staticmethod(lambda parent, tokens: 7))
    chain(pool, [1, 2])
    assert pool.lookup(None, (3, 4)) is None
    assert pool.match_prefix([3, 4, 5], limit=2)[2] == 0


def test_prefix_caching_off_caches_nothing():
    pool = KVPool(MODEL, num_blocks=4, block_size=2, enable_prefix_caching=False)
    pool.release(chain(pool, [1, 2, 3, 4]))
    assert len(pool.free) == 4 and not pool.evictable
    assert pool.match_prefix([1, 2, 3, 4, 5], limit=4)[2] == 0
