/* The bfloat16 family of the _kernels library: conversions to and from float32, and column
 * sums. The bfloat16 forms of GELU, softmax and layer norm sit with their float32 kernels. */
#include "kernels_common.h"

/* ==== bfloat16 ==========================================================================
 * bfloat16 is the top half of a float32: widening is a shift, narrowing rounds to nearest
 * even (as ml_dtypes and PyTorch do) with NaN kept NaN: 0x7fc0 or 0xffc0 by its sign, as
 * ml_dtypes writes it. Subnormals round like any other value (bfloat16 has float32's
 * exponent range). The bf16 forms of GELU, softmax, log_softmax and layer norm widen a block
 * into float32 scratch, run their family's float32 kernel on it and round once: the values are
 * the float32 kernel's on the widened input, rounded, as PyTorch computes bf16 activations
 * in float32 inside. Where the CPU has AVX512-BF16 (checked at run time, not assumed by the
 * build), narrowing uses its vcvtneps2bf16, which flushes subnormals and keeps NaN payloads:
 * blocks holding those take the portable path, so both give the same bits. */
#if defined(__x86_64__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 10))
#include <immintrin.h>
#define SF_BF16_SIMD 1
#endif

static inline uint16_t bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

static void narrow_portable(const float *restrict x, uint16_t *restrict out, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) out[i] = bf16_round(x[i]);
}

static int bf16_simd_on = -1; /* -1: not decided yet; 0 off; 1 on */

#ifdef SF_BF16_SIMD
__attribute__((target("avx512bf16,avx512f,avx512vl")))
static void narrow_avx512bf16(const float *restrict x, uint16_t *restrict out, ptrdiff_t n) {
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    const __m512i exp_mask = _mm512_set1_epi32(0x7f800000);
    ptrdiff_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512i u = _mm512_castps_si512(v);
        __m512i e = _mm512_and_si512(u, exp_mask);
        __m512i a = _mm512_and_si512(u, abs_mask);
        /* lanes the instruction rounds differently: NaN (payload kept) and subnormals */
        __mmask16 odd = _mm512_cmpgt_epu32_mask(a, exp_mask) |
                        (_mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()) &
                         _mm512_cmpneq_epi32_mask(a, _mm512_setzero_si512()));
        if (odd) {
            narrow_portable(x + i, out + i, 16);
        } else {
            __m256bh h = _mm512_cvtneps_pbh(v);
            _mm256_storeu_si256((__m256i *)(out + i), (__m256i)h);
        }
    }
    narrow_portable(x + i, out + i, n - i);
}
#endif

/* Turn the AVX512-BF16 path on (1, where the CPU has it) or off (0: the portable one, for
 * tests); -1 only asks. Returns whether it is in use. */
int bf16_simd(int enable) {
    int have = 0;
#ifdef SF_BF16_SIMD
    __builtin_cpu_init();
    have = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl");
#endif
    if (enable >= 0 || bf16_simd_on < 0) bf16_simd_on = have && enable != 0;
    return bf16_simd_on;
}

void f32_to_bf16(const float *restrict x, uint16_t *restrict out, ptrdiff_t n) {
    if (bf16_simd_on < 0) bf16_simd(-1);
#ifdef SF_BF16_SIMD
    if (bf16_simd_on) {
        narrow_avx512bf16(x, out, n);
        return;
    }
#endif
    narrow_portable(x, out, n);
}

void bf16_to_f32(const uint16_t *restrict x, float *restrict out, ptrdiff_t n) {
    for (ptrdiff_t i = 0; i < n; i++) out[i] = bf16_widen(x[i]);
}


/* out[j] = sum over the rows of x[i, j] (bf16, rows contiguous): float32 accumulators, added
 * in row order (a bias gradient, without a float32 copy of x) */
void col_sums_bf16(const uint16_t *restrict x, float *restrict out, ptrdiff_t rows,
                   ptrdiff_t n) {
    for (ptrdiff_t j = 0; j < n; j++) out[j] = 0.0f;
    for (ptrdiff_t i = 0; i < rows; i++) {
        const uint16_t *row = x + i * n;
#pragma omp simd
        for (ptrdiff_t j = 0; j < n; j++) out[j] += bf16_widen(row[j]);
    }
}
