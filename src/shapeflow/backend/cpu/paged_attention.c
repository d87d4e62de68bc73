/* Attention over a paged KV cache (serve/paged_attention.py), read in place.
 *
 * Plain C called through ctypes, built for the CPU that compiles it. The pool of one layer is
 * k_cache, v_cache [num_blocks, n_head, block_size, head_dim]; a sequence's token t lives in
 * block table[t / block_size] at row t % block_size. For every (sequence, head), a decode
 * query (attend_one) or a tile of up to QW prefill queries (attend_tile_wide) walks the keys
 * block by block through the table with an online softmax (running max m and sum l, the
 * output rescaled when m grows, as flash attention): nothing is gathered, and each K/V row
 * loaded serves the whole query tile. Causal: new query i of a sequence with context c and n
 * new tokens sits at c - n + i and sees keys 0 .. c-n+i. Caches are float32, or 1-byte rows
 * with a float32 scale per row (int8, fp8 e4m3 / e5m2), dequantized as they are read.
 * paged_write_kv copies new rows into their slots for any element size (K, V, int8 data,
 * float32 scales). Arrays are C-contiguous unless said; sizes are element counts.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isa.h"

/* Which instruction sets this build assumes (the loader refuses a build this CPU cannot run). */
const char shapeflow_paged_isa[] = SHAPEFLOW_ISA;

/* The SHA-256 of the paged_attention.c this library was built from (setup.py defines it). */
#ifndef SHAPEFLOW_PAGED_SOURCE
#define SHAPEFLOW_PAGED_SOURCE "unknown"
#endif
const char shapeflow_paged_source[] = SHAPEFLOW_PAGED_SOURCE;

#define QW 8      /* query rows per prefill tile: the lanes of one vector */
#define CH 32     /* keys scored at once (at most; a block larger than this is split) */
#define MAXD 512  /* largest head_dim (the accumulators live on the stack) */

/* exp(x) for x <= 0, as kernels.c's exp_nonpositive: 2^n e^r, Taylor to r^7, ~2 ulp;
 * below -87.3 it flushes to 0. Written branch-free so the loops over keys vectorize. */
static inline float exp_np(float x) {
    int under = !(x >= -87.3f);
    float xc = under ? 0.0f : x;
    float n = rintf(xc * 1.44269504088896341f);
    float r = xc - n * 0.693145751953125f;
    r = r - n * 1.42860682030941723e-6f;
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    union { float f; int32_t i; } s;
    s.i = ((int32_t)n + 127) << 23;
    float e = p * s.f;
    return under ? 0.0f : e;
}

/* Where the cache rows come from: float32 rows, or 1-byte rows times a float32 scale per row:
 * int8, or fp8 decoded with integer ops (vectorizable): the byte's exponent and mantissa bits
 * moved to float32's places make a float 2^(127 - bias) too small (for subnormal fp8 values
 * a float32 subnormal), so one multiply by 2^(127 - bias), folded into the scale, decodes
 * it. fp8 inf/NaN bytes decode as large finite values; the quantizer never writes them. */
enum { ROWS_F32 = 0, ROWS_INT8 = 1, ROWS_E4M3 = 2, ROWS_E5M2 = 3 };

typedef struct {
    const void *data;   /* [num_blocks, n_head, bs, d] float32 or 1-byte */
    const float *scale; /* [num_blocks, n_head, bs] (1-byte rows only) */
} rows_t;

static inline float fp8_bits(uint32_t b, int mant_bits) {
    union { uint32_t i; float f; } u;
    u.i = ((b & 0x80u) << 24) | ((b & 0x7fu) << (23 - mant_bits));
    return u.f;
}

/* Row `row` of block-head `bh` (block * n_head + head) as float32: the row itself, or
 * dequantized (times its scale) into buf. */
static inline __attribute__((always_inline)) const float *
get_row(rows_t c, int mode, ptrdiff_t bh, ptrdiff_t row, ptrdiff_t bs, ptrdiff_t d,
        float *restrict buf) {
    ptrdiff_t at = (bh * bs + row) * d;
    if (mode == ROWS_F32) return (const float *)c.data + at;
    float sc = c.scale[bh * bs + row];
    if (mode == ROWS_INT8) {
        const int8_t *r = (const int8_t *)c.data + at;
#pragma omp simd
        for (ptrdiff_t j = 0; j < d; j++) buf[j] = (float)r[j] * sc;
    } else {
        const uint8_t *r = (const uint8_t *)c.data + at;
        int e4m3 = mode == ROWS_E4M3;
        int mant = e4m3 ? 3 : 2;
        sc *= e4m3 ? 0x1p120f : 0x1p112f; /* 2^(127 - 7), 2^(127 - 15) */
#pragma omp simd
        for (ptrdiff_t j = 0; j < d; j++) buf[j] = fp8_bits(r[j], mant) * sc;
    }
    return buf;
}

/* One query (a decode step) of one sequence and head at position pos: keys 0 .. pos through
 * the table in chunks of at most CH; the running max/sum rescale the accumulator when the
 * max grows. */
static inline __attribute__((always_inline)) void
attend_one(int mode, const float *restrict q, float *restrict out, ptrdiff_t pos, rows_t kc,
           rows_t vc, const int32_t *restrict table, ptrdiff_t n_head, ptrdiff_t h,
           ptrdiff_t bs, ptrdiff_t d, float scale) {
    float acc[MAXD], qs[MAXD], buf[MAXD], s[CH];
    float m = -INFINITY, l = 0.0f;
    for (ptrdiff_t j = 0; j < d; j++) {
        acc[j] = 0.0f;
        qs[j] = q[j] * scale; /* scaled once, not per key */
    }
    ptrdiff_t seen = pos + 1;
    ptrdiff_t nblocks = (seen + bs - 1) / bs;
    for (ptrdiff_t b = 0; b < nblocks; b++) {
        ptrdiff_t bh = (ptrdiff_t)table[b] * n_head + h;
        ptrdiff_t in_block = seen - b * bs < bs ? seen - b * bs : bs;
        for (ptrdiff_t t0 = 0; t0 < in_block; t0 += CH) {
            ptrdiff_t nk = in_block - t0 < CH ? in_block - t0 : CH;
            float bm = -INFINITY;
            for (ptrdiff_t t = 0; t < nk; t++) {
                const float *kr = get_row(kc, mode, bh, t0 + t, bs, d, buf);
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (ptrdiff_t j = 0; j < d; j++) dot += qs[j] * kr[j];
                s[t] = dot;
                bm = dot > bm ? dot : bm;
            }
            if (bm > m) {
                float fade = exp_np(m - bm); /* 0 when m was -inf */
                l *= fade;
#pragma omp simd
                for (ptrdiff_t j = 0; j < d; j++) acc[j] *= fade;
                m = bm;
            }
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (ptrdiff_t t = 0; t < nk; t++) {
                float x = s[t] - m;
                float e = x != x ? x : exp_np(x); /* a NaN score stays NaN, as in PyTorch */
                s[t] = e;
                sum += e;
            }
            l += sum;
            for (ptrdiff_t t = 0; t < nk; t++) {
                const float *vr = get_row(vc, mode, bh, t0 + t, bs, d, buf);
                float p = s[t];
#pragma omp simd
                for (ptrdiff_t j = 0; j < d; j++) acc[j] += p * vr[j];
            }
        }
    }
    float inv = 1.0f / l;
    for (ptrdiff_t j = 0; j < d; j++) out[j] = acc[j] * inv;
}

/* Several queries of one sequence and head (a prefill chunk): the tile's QW queries are the
 * lanes of one vector, so a key row is read once for all of them and a score is a broadcast
 * multiply-add per element (no horizontal sums); 4 keys go at once for independent chains.
 * Lanes past nq hold zero queries: they see every key of the walk and are never stored. */
typedef float v8 __attribute__((vector_size(QW * sizeof(float))));
typedef int32_t v8i __attribute__((vector_size(QW * sizeof(int32_t))));

static inline v8 vmax(v8 a, v8 b) {
    v8i gt = a > b;
    return (v8)(((v8i)a & gt) | ((v8i)b & ~gt));
}

static inline __attribute__((always_inline)) void
attend_tile_wide(int mode, const float *restrict q, float *restrict out, ptrdiff_t qstride,
                 ptrdiff_t nq, ptrdiff_t pos0, rows_t kc, rows_t vc,
                 const int32_t *restrict table, ptrdiff_t n_head, ptrdiff_t h, ptrdiff_t bs,
                 ptrdiff_t d, float scale) {
    v8 qt[MAXD], acc[MAXD], s[CH];
    float buf[4][MAXD];
    v8 neg_inf = {0};
    for (int r = 0; r < QW; r++) neg_inf[r] = -INFINITY;
    v8 m, l, last; /* running max and sum; the position of each lane's query */
    for (int r = 0; r < QW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        last[r] = (float)(pos0 + r);
    }
    for (ptrdiff_t j = 0; j < d; j++) {
        for (int r = 0; r < QW; r++) qt[j][r] = r < nq ? q[r * qstride + j] * scale : 0.0f;
        acc[j] = (v8){0};
    }
    ptrdiff_t seen = pos0 + nq;
    ptrdiff_t nblocks = (seen + bs - 1) / bs;
    for (ptrdiff_t b = 0; b < nblocks; b++) {
        ptrdiff_t bh = (ptrdiff_t)table[b] * n_head + h;
        ptrdiff_t in_block = seen - b * bs < bs ? seen - b * bs : bs;
        for (ptrdiff_t t0 = 0; t0 < in_block; t0 += CH) {
            ptrdiff_t nk = in_block - t0 < CH ? in_block - t0 : CH;
            float key0 = (float)(b * bs + t0);
            for (ptrdiff_t t = 0; t < nk; t += 4) {
                const float *k0 = get_row(kc, mode, bh, t0 + t, bs, d, buf[0]);
                const float *k1 = t + 1 < nk ? get_row(kc, mode, bh, t0 + t + 1, bs, d, buf[1]) : k0;
                const float *k2 = t + 2 < nk ? get_row(kc, mode, bh, t0 + t + 2, bs, d, buf[2]) : k0;
                const float *k3 = t + 3 < nk ? get_row(kc, mode, bh, t0 + t + 3, bs, d, buf[3]) : k0;
                v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
                for (ptrdiff_t j = 0; j < d; j++) {
                    s0 += qt[j] * k0[j];
                    s1 += qt[j] * k1[j];
                    s2 += qt[j] * k2[j];
                    s3 += qt[j] * k3[j];
                }
                s[t] = s0;
                if (t + 1 < nk) s[t + 1] = s1;
                if (t + 2 < nk) s[t + 2] = s2;
                if (t + 3 < nk) s[t + 3] = s3;
            }
            v8 bm = s[0];
            if (key0 + (float)(nk - 1) > last[0]) { /* the chunk crosses the diagonal: mask */
                for (ptrdiff_t t = 0; t < nk; t++) {
                    v8i keep = (key0 + (float)t) - last <= 0.0f;
                    s[t] = (v8)(((v8i)s[t] & keep) | ((v8i)neg_inf & ~keep));
                }
                bm = s[0];
            }
            for (ptrdiff_t t = 1; t < nk; t++) bm = vmax(bm, s[t]);
            v8 fade;
            int grew = 0;
            for (int r = 0; r < QW; r++) {
                float top = bm[r] > m[r] ? bm[r] : m[r];
                grew |= top > m[r];
                fade[r] = top > m[r] ? exp_np(m[r] - top) : 1.0f; /* 0 when m was -inf */
                m[r] = top;
            }
            if (grew) {
                l *= fade;
                for (ptrdiff_t j = 0; j < d; j++) acc[j] *= fade;
            }
            for (ptrdiff_t t = 0; t < nk; t++) {
                for (int r = 0; r < QW; r++) { /* masked (-inf): 0; a NaN score stays NaN */
                    float x = s[t][r] - m[r];
                    s[t][r] = x != x ? x : exp_np(x);
                }
                l += s[t];
            }
            for (ptrdiff_t t = 0; t < nk; t += 4) {
                const float *v0 = get_row(vc, mode, bh, t0 + t, bs, d, buf[0]);
                const float *v1 = t + 1 < nk ? get_row(vc, mode, bh, t0 + t + 1, bs, d, buf[1]) : v0;
                const float *v2 = t + 2 < nk ? get_row(vc, mode, bh, t0 + t + 2, bs, d, buf[2]) : v0;
                const float *v3 = t + 3 < nk ? get_row(vc, mode, bh, t0 + t + 3, bs, d, buf[3]) : v0;
                v8 zero = {0};
                v8 p0 = s[t], p1 = t + 1 < nk ? s[t + 1] : zero;
                v8 p2 = t + 2 < nk ? s[t + 2] : zero, p3 = t + 3 < nk ? s[t + 3] : zero;
                for (ptrdiff_t j = 0; j < d; j++)
                    acc[j] += p0 * v0[j] + p1 * v1[j] + p2 * v2[j] + p3 * v3[j];
            }
        }
    }
    for (ptrdiff_t r = 0; r < nq; r++) {
        float inv = 1.0f / l[r];
        for (ptrdiff_t j = 0; j < d; j++) out[r * qstride + j] = acc[j][r] * inv;
    }
}

/* 0 when the batch is valid. Errors: 1 query_lens do not sum to n_tokens; 2 not 0 <=
 * query_len <= context_len <= max_blocks * block_size; 3 a block the context uses is outside
 * [0, num_blocks); 4 head_dim beyond MAXD. */
static int check_batch(const int32_t *restrict tables, const int32_t *restrict context_lens,
                       const int32_t *restrict query_lens, ptrdiff_t n_seqs,
                       ptrdiff_t max_blocks, ptrdiff_t n_tokens, ptrdiff_t num_blocks,
                       ptrdiff_t bs, ptrdiff_t d) {
    if (d > MAXD) return 4;
    ptrdiff_t total = 0;
    for (ptrdiff_t s = 0; s < n_seqs; s++) {
        ptrdiff_t c = context_lens[s], n = query_lens[s];
        if (n < 0 || c < n || c > max_blocks * bs) return 2;
        for (ptrdiff_t b = 0; b * bs < c; b++) {
            int32_t id = tables[s * max_blocks + b];
            if (id < 0 || id >= num_blocks) return 3;
        }
        total += n;
    }
    return total != n_tokens;
}

static inline __attribute__((always_inline)) void
attend_all_d(int mode, const float *restrict q, rows_t kc, rows_t vc,
             const int32_t *restrict tables, const int32_t *restrict context_lens,
             const int32_t *restrict query_lens, ptrdiff_t n_seqs, ptrdiff_t max_blocks,
             ptrdiff_t n_head, ptrdiff_t bs, ptrdiff_t d, float scale, float *restrict out) {
    ptrdiff_t row = n_head * d, start = 0;
    for (ptrdiff_t s = 0; s < n_seqs; s++) {
        ptrdiff_t c = context_lens[s], n = query_lens[s];
        const int32_t *table = tables + s * max_blocks;
        for (ptrdiff_t h = 0; h < n_head; h++) {
            if (n == 1) { /* decode: its own copy, every loop over queries gone */
                attend_one(mode, q + start * row + h * d, out + start * row + h * d, c - 1, kc,
                           vc, table, n_head, h, bs, d, scale);
                continue;
            }
            for (ptrdiff_t i = 0; i < n; i += QW) {
                ptrdiff_t nq = n - i < QW ? n - i : QW;
                ptrdiff_t off = (start + i) * row + h * d;
                attend_tile_wide(mode, q + off, out + off, row, nq, c - n + i, kc, vc, table,
                                 n_head, h, bs, d, scale);
            }
        }
        start += n;
    }
}

/* The common head sizes get copies with head_dim a constant: their loops over it unroll
 * whole (no peeling, no remainder), which is most of a short row's cost. */
static inline __attribute__((always_inline)) void
attend_all(int mode, const float *restrict q, rows_t kc, rows_t vc,
           const int32_t *restrict tables, const int32_t *restrict context_lens,
           const int32_t *restrict query_lens, ptrdiff_t n_seqs, ptrdiff_t max_blocks,
           ptrdiff_t n_head, ptrdiff_t bs, ptrdiff_t d, float scale, float *restrict out) {
#define ATTEND_D(D) attend_all_d(mode, q, kc, vc, tables, context_lens, query_lens, n_seqs, \
                                 max_blocks, n_head, bs, D, scale, out)
    switch (d) {
    case 32: ATTEND_D(32); break;
    case 64: ATTEND_D(64); break;
    case 128: ATTEND_D(128); break;
    default: ATTEND_D(d);
    }
#undef ATTEND_D
}

/* out [N, n_head, head_dim] from float32 caches; returns check_batch's code (nothing is
 * written unless the whole batch is valid). */
int paged_attention_f32(const float *restrict q, const float *restrict kc,
                        const float *restrict vc, const int32_t *restrict tables,
                        const int32_t *restrict context_lens, const int32_t *restrict query_lens,
                        ptrdiff_t n_seqs, ptrdiff_t max_blocks, ptrdiff_t n_tokens,
                        ptrdiff_t num_blocks, ptrdiff_t n_head, ptrdiff_t bs, ptrdiff_t d,
                        float scale, float *restrict out) {
    int err = check_batch(tables, context_lens, query_lens, n_seqs, max_blocks, n_tokens,
                          num_blocks, bs, d);
    if (err) return err;
    rows_t k = {kc, NULL}, v = {vc, NULL};
    attend_all(ROWS_F32, q, k, v, tables, context_lens, query_lens, n_seqs, max_blocks, n_head,
               bs, d, scale, out);
    return 0;
}

/* The same from 1-byte caches with a float32 scale per (block, head, row): kind 0 int8,
 * 1 fp8 e4m3 (e4m3fn), 2 fp8 e5m2. */
int paged_attention_q8(const float *restrict q, const void *kc, const float *kscale,
                       const void *vc, const float *vscale, ptrdiff_t kind,
                       const int32_t *restrict tables, const int32_t *restrict context_lens,
                       const int32_t *restrict query_lens, ptrdiff_t n_seqs,
                       ptrdiff_t max_blocks, ptrdiff_t n_tokens, ptrdiff_t num_blocks,
                       ptrdiff_t n_head, ptrdiff_t bs, ptrdiff_t d, float scale,
                       float *restrict out) {
    if (kind < 0 || kind > 2) return 5;
    int err = check_batch(tables, context_lens, query_lens, n_seqs, max_blocks, n_tokens,
                          num_blocks, bs, d);
    if (err) return err;
    rows_t k = {kc, kscale}, v = {vc, vscale};
    if (kind == 0)
        attend_all(ROWS_INT8, q, k, v, tables, context_lens, query_lens, n_seqs, max_blocks,
                   n_head, bs, d, scale, out);
    else if (kind == 1)
        attend_all(ROWS_E4M3, q, k, v, tables, context_lens, query_lens, n_seqs, max_blocks,
                   n_head, bs, d, scale, out);
    else
        attend_all(ROWS_E5M2, q, k, v, tables, context_lens, query_lens, n_seqs, max_blocks,
                   n_head, bs, d, scale, out);
    return 0;
}

/* kc[slot // bs, h, slot % bs, :] = k[i, h, :] for each of the n slots, and the same for v;
 * rows of row_bytes (head_dim * element size), any element size. k and v may be views of a
 * fused qkv: token i starts src_stride bytes after token i-1, its heads back to back.
 * Returns 1 (writing nothing) when a slot is outside [0, num_blocks * bs). */
int paged_write_kv(char *restrict kc, char *restrict vc, const char *restrict k,
                   const char *restrict v, ptrdiff_t src_stride, const int64_t *restrict slots,
                   ptrdiff_t n, ptrdiff_t n_head, ptrdiff_t bs, ptrdiff_t num_blocks,
                   ptrdiff_t row_bytes) {
    for (ptrdiff_t i = 0; i < n; i++)
        if (slots[i] < 0 || slots[i] >= num_blocks * bs) return 1;
    for (ptrdiff_t i = 0; i < n; i++) {
        ptrdiff_t b = slots[i] / bs, o = slots[i] % bs;
        for (ptrdiff_t h = 0; h < n_head; h++) {
            ptrdiff_t dst = ((b * n_head + h) * bs + o) * row_bytes;
            ptrdiff_t src = i * src_stride + h * row_bytes;
            memcpy(kc + dst, k + src, (size_t)row_bytes);
            memcpy(vc + dst, v + src, (size_t)row_bytes);
        }
    }
    return 0;
}
