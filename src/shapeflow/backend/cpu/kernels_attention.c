/* The attention family of the _kernels library: flash attention's per-block softmax. */
#include "kernels_common.h"

/* ---- blockwise ("flash") attention: the softmax parts of one block of scores ------------
 * x holds rows of n raw scores q.k (the caller has already scaled them and added the mask
 * when it has an attn_mask, and then passes scale 1). Row r is query r % period of its
 * block; when period > 0 it sees keys j < offset + r % period + 1 only (causal, top-left
 * aligned: offset = the block's first query - the panel's first key), else all n. Entries it
 * does not see come out 0.
 * The loops run over whole chunks of FLASH_W lanes, the last one masked by a select: a loop
 * whose trip count varies row by row (causal rows) would run its short rows scalar (gcc's
 * cost model), twice as slow as these chunks (measured: 4096 causal rows of 64). */
#define FLASH_W 16

static inline ptrdiff_t flash_seen(ptrdiff_t query, ptrdiff_t period, ptrdiff_t offset,
                                   ptrdiff_t n) {
    if (period <= 0) return n;
    ptrdiff_t k = offset + query + 1;
    return k < 0 ? 0 : (k > n ? n : k);
}

/* the row max of row[j] over j < keep (NaN entries skipped; -inf when none) */
static inline float flash_row_max(const float *restrict row, ptrdiff_t keep, ptrdiff_t n) {
    float acc[FLASH_W];
    for (int i = 0; i < FLASH_W; i++) acc[i] = -INFINITY;
    ptrdiff_t full = n & ~(ptrdiff_t)(FLASH_W - 1), j = 0;
    for (; j < full && j < keep; j += FLASH_W) {
#pragma omp simd
        for (int i = 0; i < FLASH_W; i++) {
            float v = j + i < keep ? row[j + i] : -INFINITY;
            acc[i] = v > acc[i] ? v : acc[i];
        }
    }
    for (; j < keep; j++) acc[0] = row[j] > acc[0] ? row[j] : acc[0];
    float m = acc[0];
    for (int i = 1; i < FLASH_W; i++) m = acc[i] > m ? acc[i] : m;
    return m;
}

static inline float flash_exp(float x, float scale, float shift) {
    float d = x * scale - shift; /* <= 0, or NaN; rounding can make it slightly > 0, where
                                  * exp_nonpositive is exact too (2^n holds for n <= 127) */
    float e = exp_nonpositive(d);
    return d == d ? e : d;
}

/* row[j] = exp(row[j] * scale - shift) for j < keep, 0 after; returns the sum (NaN kept) */
static inline float flash_row_exp(float *restrict row, ptrdiff_t keep, ptrdiff_t n,
                                  float scale, float shift) {
    float acc[FLASH_W];
    for (int i = 0; i < FLASH_W; i++) acc[i] = 0.0f;
    ptrdiff_t full = n & ~(ptrdiff_t)(FLASH_W - 1), j = 0;
    for (; j < full && j < keep; j += FLASH_W) {
#pragma omp simd
        for (int i = 0; i < FLASH_W; i++) {
            float e = j + i < keep ? flash_exp(row[j + i], scale, shift) : 0.0f;
            row[j + i] = e;
            acc[i] += e;
        }
    }
    for (; j < keep; j++) {
        row[j] = flash_exp(row[j], scale, shift);
        acc[0] += row[j];
    }
    for (; j < n; j++) row[j] = 0.0f;
    float s = 0.0f;
    for (int i = 0; i < FLASH_W; i++) s += acc[i];
    return s;
}

/* The only key panel of a block: rows become softmax(x * scale) and lse[r] their
 * logsumexp. A row that sees nothing (or only -inf) becomes 0 with lse -inf, as the math
 * kernel's safe softmax gives; +inf or NaN scores make the row and its lse NaN. */
void flash_softmax_lse_f32(float *restrict x, float *restrict lse, ptrdiff_t rows,
                           ptrdiff_t n, float scale, ptrdiff_t period, ptrdiff_t offset) {
    ptrdiff_t query = 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        ptrdiff_t keep = flash_seen(query, period, offset, n);
        if (period > 0 && ++query == period) query = 0;
        float m = flash_row_max(row, keep, n) * scale; /* scale > 0 */
        if (m == -INFINITY) {
            float nan = 0.0f; /* a NaN entry in a row of -inf: NaN, as exp(NaN) gives */
            for (ptrdiff_t j = 0; j < keep; j++) nan += row[j] != row[j] ? row[j] : 0.0f;
            for (ptrdiff_t j = 0; j < n; j++) row[j] = j < keep ? nan : 0.0f;
            lse[r] = nan == 0.0f ? -INFINITY : nan;
            continue;
        }
        float s = flash_row_exp(row, keep, n, scale, m);
        float inv = 1.0f / s;
        ptrdiff_t full = n & ~(ptrdiff_t)(FLASH_W - 1), j = 0;
        for (; j < full && j < keep; j += FLASH_W) {
#pragma omp simd
            for (int i = 0; i < FLASH_W; i++) row[j + i] = row[j + i] * inv;
        }
        for (; j < keep; j++) row[j] = row[j] * inv;
        lse[r] = m + logf(s);
    }
}

/* One key panel of several (online softmax): with the running row max m and sum l from
 * the panels before (ignored when first), rows become exp(x * scale - m_new); l becomes
 * l * fade + rowsum, m becomes m_new, and fade[r] = exp(m_old - m_new) is what the
 * running output must be multiplied by. Rows that have seen nothing keep m = -inf. */
void flash_online_f32(float *restrict x, float *restrict m, float *restrict l,
                      float *restrict fade, ptrdiff_t rows, ptrdiff_t n, float scale,
                      ptrdiff_t period, ptrdiff_t offset, int first) {
    ptrdiff_t query = 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        ptrdiff_t keep = flash_seen(query, period, offset, n);
        if (period > 0 && ++query == period) query = 0;
        float old = first ? -INFINITY : m[r];
        float bm = flash_row_max(row, keep, n) * scale;
        float top = bm > old ? bm : old;
        float shift = top == -INFINITY ? 0.0f : top; /* nothing seen yet: exp gives 0 */
        float s = flash_row_exp(row, keep, n, scale, shift);
        float f = first ? 0.0f : exp_nonpositive(old - shift);
        fade[r] = f;
        l[r] = first ? s : l[r] * f + s;
        m[r] = top;
    }
}

/* Backward of one block from the saved logsumexp: s (raw scores, as forward had them)
 * becomes p = exp(s * scale - lse) and dp (dO @ V^T, dropout mask applied) becomes
 * dS = p * (dp - delta) * ds_scale, delta = rowsum(dO * O). Rows with lse -inf (they saw
 * nothing) get p = dS = 0. */
void flash_grad_f32(float *restrict s, float *restrict dp, const float *restrict lse,
                    const float *restrict delta, ptrdiff_t rows, ptrdiff_t n, float scale,
                    float ds_scale, ptrdiff_t period, ptrdiff_t offset) {
    ptrdiff_t query = 0;
    ptrdiff_t full = n & ~(ptrdiff_t)(FLASH_W - 1);
    for (ptrdiff_t r = 0; r < rows; r++) {
        float *row = s + r * n, *drow = dp + r * n;
        ptrdiff_t keep = flash_seen(query, period, offset, n);
        if (period > 0 && ++query == period) query = 0;
        float shift = lse[r], dl = delta[r];
        if (shift == -INFINITY) keep = 0;
        ptrdiff_t j = 0;
        for (; j < full && j < keep; j += FLASH_W) {
#pragma omp simd
            for (int i = 0; i < FLASH_W; i++) {
                float e = j + i < keep ? flash_exp(row[j + i], scale, shift) : 0.0f;
                row[j + i] = e;
                drow[j + i] = e * (drow[j + i] - dl) * ds_scale;
            }
        }
        for (; j < keep; j++) {
            float e = flash_exp(row[j], scale, shift);
            row[j] = e;
            drow[j] = e * (drow[j] - dl) * ds_scale;
        }
        for (; j < n; j++) row[j] = drow[j] = 0.0f;
    }
}
