/* Fused float32 CPU kernels for the ops whose NumPy form takes many passes over memory.
 *
 * Plain C called through ctypes (backend/cpu/kernels.py), built for the CPU that compiles it.
 * Each kernel computes what the NumPy code beside its op computes, in one or two passes.
 * Arrays are C-contiguous float32; sizes are counts of elements. One library, `_kernels`,
 * built from this file and one file per family (setup.py compiles kernels.c and every
 * kernels_*.c beside it into it, and records the sha256 of them with kernels_*.h):
 *   kernels.c            GELU's table interpolation (float32, bfloat16), the library's tags
 *   kernels_norm.c       layer norm / RMS norm, batch norm
 *   kernels_softmax.c    softmax, log_softmax (float32, bfloat16)
 *   kernels_loss.c       cross entropy
 *   kernels_optim.c      Adam / AdamW, axpy
 *   kernels_bf16.c       bfloat16 conversions, column sums
 *   kernels_rnn.c        LSTM / GRU cells' pointwise steps
 *   kernels_conv.c       im2col / col2im
 *   kernels_attention.c  the softmax parts of flash attention's blocks
 */
#include "isa.h"
#include "kernels_common.h"

/* Which instruction sets this build assumes: kernels.py refuses to call into a library
 * built for a CPU with more of them than the one it runs on. */
const char shapeflow_isa[] = SHAPEFLOW_ISA;

/* The SHA-256 of the sources this library was built from (setup.py defines it: kernels.c,
 * kernels_*.c and kernels_*.h in name order, one after another): kernels.py refuses a
 * library built from other versions of them. */
#ifndef SHAPEFLOW_KERNELS_SOURCE
#define SHAPEFLOW_KERNELS_SOURCE "unknown"
#endif
const char shapeflow_source[] = SHAPEFLOW_KERNELS_SOURCE;

/* ---- table interpolation: out = table(x) (* times) -----------------------------------
 * pairs holds (values[k], slopes[k]) interleaved for k = 0 .. 2*offset-1, x = (k - offset) /
 * steps; the steps mirror gelu_kernels._interp_block: v = clip(x * steps), f = floor(v),
 * k = f + offset, out = (values[k] + slopes[k] * (v - f)) * times. NaN stays NaN (its index
 * is clamped). Interleaved, one 64-bit load fetches both entries: AVX-512 gathers them 8 at
 * a time (~1.7x faster on Zen 4 than two 16-lane gathers of 32-bit entries). */
static inline float interp(float x, const float *restrict pairs, float steps, float offset) {
    float v = x * steps;
    v = v < -offset ? -offset : v;
    v = v > offset - 1.0f ? offset - 1.0f : v;
    float f = floorf(v);
    float fi = f == f ? f : 0.0f; /* NaN: any index will do, the fraction is NaN */
    int k = (int)fi + (int)offset;
    int last = 2 * (int)offset - 1;
    k = k < 0 ? 0 : (k > last ? last : k);
    return pairs[2 * k] + pairs[2 * k + 1] * (v - f);
}

#ifdef __AVX512F__
#include <immintrin.h>
/* interp on 16 lanes: the same float32 steps (clamps that keep NaN, floor, one multiply and
 * one add, no fused multiply-add) */
static inline __m512 interp16(__m512 x, const float *restrict pairs, float steps,
                              float offset) {
    const __m512 lo = _mm512_set1_ps(-offset), hi = _mm512_set1_ps(offset - 1.0f);
    __m512 v = _mm512_mul_ps(x, _mm512_set1_ps(steps));
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
    __m512 f = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 fi = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(f, f, _CMP_ORD_Q), f);
    __m512i k = _mm512_add_epi32(_mm512_cvttps_epi32(fi), _mm512_set1_epi32((int)offset));
    k = _mm512_max_epi32(k, _mm512_setzero_si512());
    k = _mm512_min_epi32(k, _mm512_set1_epi32(2 * (int)offset - 1));
    const double *p64 = (const double *)pairs;
    __m512 lo8 = _mm512_castpd_ps(_mm512_i32gather_pd(_mm512_castsi512_si256(k), p64, 8));
    __m512 hi8 = _mm512_castpd_ps(_mm512_i32gather_pd(_mm512_extracti64x4_epi64(k, 1), p64, 8));
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    __m512 val = _mm512_permutex2var_ps(lo8, even, hi8);
    __m512 slope = _mm512_permutex2var_ps(lo8, odd, hi8);
    return _mm512_add_ps(val, _mm512_mul_ps(slope, _mm512_sub_ps(v, f)));
}
#endif

/* times may be NULL (out = table(x)) */
void interp_times_f32(const float *restrict x, const float *restrict times,
                      const float *restrict pairs, float *restrict out, ptrdiff_t n,
                      float steps, float offset) {
    ptrdiff_t i = 0;
#ifdef __AVX512F__
    for (; i + 16 <= n; i += 16) {
        __m512 r = interp16(_mm512_loadu_ps(x + i), pairs, steps, offset);
        if (times) r = _mm512_mul_ps(r, _mm512_loadu_ps(times + i));
        _mm512_storeu_ps(out + i, r);
    }
#endif
    if (times) {
        for (; i < n; i++) out[i] = interp(x[i], pairs, steps, offset) * times[i];
    } else {
        for (; i < n; i++) out[i] = interp(x[i], pairs, steps, offset);
    }
}

#define SF_BLOCK 2048 /* elements of float32 scratch per block: 8 KiB, stays in L1 */

/* interp_times_f32 on bf16 arrays (times may be NULL): out = round(table(x) * times) */
void interp_times_bf16(const uint16_t *restrict x, const uint16_t *restrict times,
                       const float *restrict pairs,
                       uint16_t *restrict out, ptrdiff_t n, float steps, float offset) {
    float xs[SF_BLOCK], ts[SF_BLOCK], os[SF_BLOCK];
    for (ptrdiff_t a = 0; a < n; a += SF_BLOCK) {
        ptrdiff_t k = n - a < SF_BLOCK ? n - a : SF_BLOCK;
        bf16_to_f32(x + a, xs, k);
        if (times) bf16_to_f32(times + a, ts, k);
        interp_times_f32(xs, times ? ts : NULL, pairs, os, k, steps, offset);
        f32_to_bf16(os, out + a, k);
    }
}
