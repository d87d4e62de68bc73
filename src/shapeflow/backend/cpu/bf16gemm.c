/* bfloat16 x bfloat16 matrix products with AVX512-BF16 (vdpbf16ps), float32 accumulate.
 *
 * Both operands are packed, from any element strides (transposed views included): B into
 * k-pair-interleaved panels of NR columns (the layout vdpbf16ps reads: for each column the
 * pair B[2p, j], B[2p+1, j]), A into MR-row panels of 32-bit pairs that are broadcast. An
 * odd k is padded with a zero. The four contiguous layouts pack with vector interleaves or
 * 32-bit pair copies; other strides go element by element.
 *
 * bf16gemm: C (float32) += A @ B, blocked KC x NC (C holds zeros or the bias).
 * bf16gemm_bf16: C (bfloat16) = round(A @ B + bias): B packed whole, A by blocks of rows,
 *   each 12 x 32 tile summed over all of k in registers, the float32 bias added, rounded
 *   once to nearest even (NaN to sign | 0x7fc0, as backend/cpu/kernels.c rounds). No float32
 *   m x n array exists; the packed copies are the operands' size in bf16.
 * Written because MKL's gemm_bf16bf16f32 ran no faster than its sgemm on AMD Zen 4. */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SHAPEFLOW_BF16GEMM_SOURCE
#define SHAPEFLOW_BF16GEMM_SOURCE "unknown"
#endif
const char shapeflow_bf16gemm_source[] = SHAPEFLOW_BF16GEMM_SOURCE;

#define MR 12
#define NR 32
#define KC 384  /* k elements per block (KC / 2 pairs): A panel MR*KC*2 bytes in L1 */
#define NC 384  /* columns per block: the packed B block KC*NC*2 bytes in L2 */
#define A_BLOCK_BYTES (192 * 1024) /* bf16_out: packed rows of A per block, in L2 */
#define MAX_K 32768 /* bf16_out: one B panel (NR * k * 2 bytes) must stay in L2 */

int bf16gemm_mr = MR, bf16gemm_nr = NR;

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

int bf16gemm_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

static inline uint32_t load_pair(const uint16_t *p) { /* two adjacent bf16, any alignment */
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* lanes (rows of A, columns of B) whose kc elements are contiguous, lane l starting at
 * first + l * stride: d32[p * lanes + l] = the pair (2p, 2p + 1) of lane l as one word;
 * lanes from `valid` on and an odd k's missing second element are zero */
static void pack_pair_words(const uint16_t *first, ptrdiff_t stride, ptrdiff_t lanes,
                            ptrdiff_t valid, ptrdiff_t kc, uint32_t *d32) {
    ptrdiff_t pairs = (kc + 1) / 2, full = kc / 2;
    for (ptrdiff_t l = 0; l < lanes; l++) {
        const uint16_t *s = first + l * stride;
        if (l >= valid) {
            for (ptrdiff_t p = 0; p < pairs; p++) d32[p * lanes + l] = 0;
            continue;
        }
        for (ptrdiff_t p = 0; p < full; p++) d32[p * lanes + l] = load_pair(s + 2 * p);
        if (full < pairs) d32[full * lanes + l] = s[2 * full];
    }
}

/* lanes 0..31 of the result: a[0], b[0], a[1], b[1], ... a[15], b[15] (lo) or a[16..31] (hi) */
TGT static inline __m512i interleave16(__m512i a, __m512i b, int hi) {
    const __m512i lo_idx = _mm512_set_epi16(
        47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8,
        39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
    return _mm512_permutex2var_epi16(a, hi ? hi_idx : lo_idx, b);
}

/* B[k0:k0+kc, j0:j0+nc] -> panels [nc/NR][kc/2 pairs][NR cols][2], zero padded */
TGT static void pack_b(const uint16_t *b, ptrdiff_t sk, ptrdiff_t sn, ptrdiff_t k0,
                       ptrdiff_t kc, ptrdiff_t j0, ptrdiff_t nc, uint16_t *dst) {
    ptrdiff_t pairs = (kc + 1) / 2;
    for (ptrdiff_t jp = 0; jp < nc; jp += NR) {
        uint16_t *d = dst + (jp / NR) * pairs * NR * 2;
        ptrdiff_t w = nc - jp < NR ? nc - jp : NR;
        const uint16_t *col = b + k0 * sk + (j0 + jp) * sn;
        if (sn == 1) { /* rows contiguous: interleave two rows, 32 columns at a time */
            __mmask32 mw = w >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << w) - 1);
            for (ptrdiff_t p = 0; p < pairs; p++) {
                __m512i r0 = _mm512_maskz_loadu_epi16(mw, col + 2 * p * sk);
                __m512i r1 = 2 * p + 1 < kc ? _mm512_maskz_loadu_epi16(mw, col + (2 * p + 1) * sk)
                                            : _mm512_setzero_si512();
                _mm512_storeu_si512(d + p * NR * 2, interleave16(r0, r1, 0));
                _mm512_storeu_si512(d + p * NR * 2 + 32, interleave16(r0, r1, 1));
            }
        } else if (sk == 1) { /* columns contiguous: each pair is one 32-bit word */
            pack_pair_words(col, sn, NR, w, kc, (uint32_t *)d);
        } else {
            for (ptrdiff_t p = 0; p < pairs; p++) {
                uint16_t *row = d + p * NR * 2;
                const uint16_t *s0 = col + 2 * p * sk, *s1 = s0 + sk;
                int has1 = 2 * p + 1 < kc;
                ptrdiff_t j = 0;
                for (; j < w; j++) {
                    row[2 * j] = s0[j * sn];
                    row[2 * j + 1] = has1 ? s1[j * sn] : 0;
                }
                for (; j < NR; j++) row[2 * j] = row[2 * j + 1] = 0;
            }
        }
    }
}

/* A[i0:i0+mc, k0:k0+kc] -> panels [mc/MR][kc/2 pairs][MR rows][2], zero padded */
TGT static void pack_a(const uint16_t *a, ptrdiff_t sm, ptrdiff_t sk, ptrdiff_t i0,
                       ptrdiff_t mc, ptrdiff_t k0, ptrdiff_t kc, uint16_t *dst) {
    ptrdiff_t pairs = (kc + 1) / 2;
    for (ptrdiff_t ip = 0; ip < mc; ip += MR) {
        uint16_t *d = dst + (ip / MR) * pairs * MR * 2;
        ptrdiff_t h = mc - ip < MR ? mc - ip : MR;
        const uint16_t *top = a + (i0 + ip) * sm + k0 * sk;
        if (sm == 1) { /* columns contiguous: interleave two columns of MR rows */
            __mmask32 mh = (__mmask32)((1u << h) - 1);
            for (ptrdiff_t p = 0; p < pairs; p++) {
                __m512i c0 = _mm512_maskz_loadu_epi16(mh, top + 2 * p * sk);
                __m512i c1 = 2 * p + 1 < kc ? _mm512_maskz_loadu_epi16(mh, top + (2 * p + 1) * sk)
                                            : _mm512_setzero_si512();
                _mm512_mask_storeu_epi16(d + p * MR * 2, (__mmask32)0xFFFFFF,
                                         interleave16(c0, c1, 0));
            }
        } else if (sk == 1) { /* rows contiguous: each pair is one 32-bit word */
            pack_pair_words(top, sm, MR, h, kc, (uint32_t *)d);
        } else {
            for (ptrdiff_t r = 0; r < MR; r++) {
                const uint16_t *s = top + r * sm;
                for (ptrdiff_t p = 0; p < pairs; p++) {
                    int ok = r < h;
                    d[(p * MR + r) * 2] = ok ? s[2 * p * sk] : 0;
                    d[(p * MR + r) * 2 + 1] = ok && 2 * p + 1 < kc ? s[(2 * p + 1) * sk] : 0;
                }
            }
        }
    }
}

/* acc[r] = Apanel @ Bpanel over `pairs` k-pairs: MR rows x 2 vectors of 16 columns */
#define TILE_SUMS(ap, bp, pairs, acc)                                                      \
    do {                                                                                   \
        for (int r_ = 0; r_ < MR; r_++) acc[r_][0] = acc[r_][1] = _mm512_setzero_ps();     \
        const uint32_t *a32_ = (const uint32_t *)(ap);                                     \
        for (ptrdiff_t p_ = 0; p_ < (pairs); p_++) {                                       \
            __m512bh b0_ = (__m512bh)_mm512_loadu_si512((bp) + p_ * NR * 2);               \
            __m512bh b1_ = (__m512bh)_mm512_loadu_si512((bp) + p_ * NR * 2 + 32);          \
            _Pragma("GCC unroll 12") for (int r_ = 0; r_ < MR; r_++) {                     \
                __m512bh av_ = (__m512bh)_mm512_set1_epi32((int)a32_[p_ * MR + r_]);       \
                acc[r_][0] = _mm512_dpbf16_ps(acc[r_][0], av_, b0_);                       \
                acc[r_][1] = _mm512_dpbf16_ps(acc[r_][1], av_, b1_);                       \
            }                                                                              \
        }                                                                                  \
    } while (0)

/* C[0:h, 0:w] += Apanel @ Bpanel over `pairs` k-pairs (h <= MR, w <= NR), float32 C */
TGT static void kernel(const uint16_t *ap, const uint16_t *bp, ptrdiff_t pairs, float *c,
                       ptrdiff_t ldc, ptrdiff_t h, ptrdiff_t w) {
    __m512 acc[MR][2];
    TILE_SUMS(ap, bp, pairs, acc);
    __mmask16 m0 = w >= 16 ? 0xFFFF : (__mmask16)((1u << w) - 1);
    __mmask16 m1 = w >= 32 ? 0xFFFF : w <= 16 ? 0 : (__mmask16)((1u << (w - 16)) - 1);
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        if (r >= h) break;
        float *cr = c + r * ldc;
        _mm512_mask_storeu_ps(cr, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), acc[r][0]));
        _mm512_mask_storeu_ps(cr + 16, m1,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), acc[r][1]));
    }
}

/* float32 -> bfloat16 bits, nearest even; NaN -> sign | 0x7fc0 (kernels.c's bf16_round) */
TGT static inline __m256i round16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __m512i nan = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)),
        _mm512_set1_epi32(0x7fc0));
    __mmask16 is_nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, is_nan, nan));
}

/* C[0:h, 0:w] = round(Apanel @ Bpanel + bias) over all `pairs`, bfloat16 C */
TGT static void kernel_bf16(const uint16_t *ap, const uint16_t *bp, ptrdiff_t pairs,
                            const float *bias, uint16_t *c, ptrdiff_t ldc, ptrdiff_t h,
                            ptrdiff_t w) {
    __m512 acc[MR][2];
    TILE_SUMS(ap, bp, pairs, acc);
    __mmask16 m0 = w >= 16 ? 0xFFFF : (__mmask16)((1u << w) - 1);
    __mmask16 m1 = w >= 32 ? 0xFFFF : w <= 16 ? 0 : (__mmask16)((1u << (w - 16)) - 1);
    __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        if (r >= h) break;
        uint16_t *cr = c + r * ldc;
        /* sum + bias, as the float32 path's bias-filled C += sum */
        _mm256_mask_storeu_epi16(cr, m0, round16(_mm512_add_ps(b0, acc[r][0])));
        _mm256_mask_storeu_epi16(cr + 16, m1, round16(_mm512_add_ps(b1, acc[r][1])));
    }
}

/* c (float32, row stride ldc, already holding zeros or the bias) += a @ b; element strides.
 * Returns 0, or -1 when the packing buffers cannot be allocated. */
TGT int bf16gemm(const uint16_t *a, ptrdiff_t a_sm, ptrdiff_t a_sk, const uint16_t *b,
                 ptrdiff_t b_sk, ptrdiff_t b_sn, float *c, ptrdiff_t ldc, ptrdiff_t m,
                 ptrdiff_t n, ptrdiff_t k) {
    if (m <= 0 || n <= 0 || k <= 0) return 0;
    ptrdiff_t mpad = (m + MR - 1) / MR * MR;
    uint16_t *abuf = aligned_alloc(64, ((size_t)mpad * (KC + 2) * 2 + 127) / 64 * 64);
    uint16_t *bbuf = aligned_alloc(64, ((size_t)(NC + NR) * (KC + 2) * 2 + 127) / 64 * 64);
    if (!abuf || !bbuf) { free(abuf); free(bbuf); return -1; }
    for (ptrdiff_t k0 = 0; k0 < k; k0 += KC) {
        ptrdiff_t kc = k - k0 < KC ? k - k0 : KC, pairs = (kc + 1) / 2;
        pack_a(a, a_sm, a_sk, 0, m, k0, kc, abuf);
        for (ptrdiff_t j0 = 0; j0 < n; j0 += NC) {
            ptrdiff_t nc = n - j0 < NC ? n - j0 : NC;
            pack_b(b, b_sk, b_sn, k0, kc, j0, nc, bbuf);
            for (ptrdiff_t i = 0; i < m; i += MR) {
                const uint16_t *ap = abuf + (i / MR) * pairs * MR * 2;
                ptrdiff_t h = m - i < MR ? m - i : MR;
                for (ptrdiff_t jp = 0; jp < nc; jp += NR) {
                    ptrdiff_t w = nc - jp < NR ? nc - jp : NR;
                    kernel(ap, bbuf + (jp / NR) * pairs * NR * 2, pairs,
                           c + i * ldc + j0 + jp, ldc, h, w);
                }
            }
        }
    }
    free(abuf);
    free(bbuf);
    return 0;
}

/* c (bfloat16, row stride ldc) = round(a @ b + bias); bias: n float32 values or NULL.
 * Returns 0; -1 when the packing buffers cannot be allocated; 1 when k > MAX_K (the caller
 * takes the float32 path). */
TGT int bf16gemm_bf16(const uint16_t *a, ptrdiff_t a_sm, ptrdiff_t a_sk, const uint16_t *b,
                      ptrdiff_t b_sk, ptrdiff_t b_sn, const float *bias, uint16_t *c,
                      ptrdiff_t ldc, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k) {
    if (k > MAX_K) return 1;
    if (m <= 0 || n <= 0) return 0;
    ptrdiff_t pairs = k > 0 ? (k + 1) / 2 : 0, panels = (n + NR - 1) / NR;
    ptrdiff_t mc = A_BLOCK_BYTES / ((pairs > 0 ? pairs : 1) * 4) / MR * MR;
    mc = mc < MR ? MR : mc;
    ptrdiff_t mpad = (m + MR - 1) / MR * MR;
    mc = mc > mpad ? mpad : mc;
    uint16_t *bbuf = aligned_alloc(64, ((size_t)panels * (pairs + 1) * NR * 4 + 127) / 64 * 64);
    uint16_t *abuf = aligned_alloc(64, ((size_t)mc * (pairs + 1) * 4 + 127) / 64 * 64);
    if (!abuf || !bbuf) { free(abuf); free(bbuf); return -1; }
    if (pairs > 0) pack_b(b, b_sk, b_sn, 0, k, 0, n, bbuf);
    for (ptrdiff_t i0 = 0; i0 < m; i0 += mc) {
        ptrdiff_t rows = m - i0 < mc ? m - i0 : mc;
        if (pairs > 0) pack_a(a, a_sm, a_sk, i0, rows, 0, k, abuf);
        for (ptrdiff_t jp = 0; jp < n; jp += NR) {
            ptrdiff_t w = n - jp < NR ? n - jp : NR;
            const uint16_t *bp = bbuf + (jp / NR) * pairs * NR * 2;
            for (ptrdiff_t ip = 0; ip < rows; ip += MR) {
                ptrdiff_t h = rows - ip < MR ? rows - ip : MR;
                kernel_bf16(abuf + (ip / MR) * pairs * MR * 2, bp, pairs,
                            bias ? bias + jp : NULL, c + (i0 + ip) * ldc + jp, ldc, h, w);
            }
        }
    }
    free(abuf);
    free(bbuf);
    return 0;
}
