/* bfloat16 x bfloat16 -> float32 matrix products with AVX512-BF16 (vdpbf16ps).
 *
 * C[m, n] += A[m, k] @ B[k, n], any element strides (transposed views included): both
 * operands are packed per cache block, B into k-pair-interleaved panels of NR columns
 * (the layout vdpbf16ps reads: for each column the pair B[2p, j], B[2p+1, j]), A into
 * MR-row panels of 32-bit pairs that are broadcast. An odd k is padded with a zero.
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

int bf16gemm_mr = MR, bf16gemm_nr = NR;

#define TGT __attribute__((target("avx512f,avx512bw,avx512bf16")))

int bf16gemm_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
}

/* B[k0:k0+kc, j0:j0+nc] -> panels [nc/NR][kc/2 pairs][NR cols][2], zero padded */
static void pack_b(const uint16_t *b, ptrdiff_t sk, ptrdiff_t sn, ptrdiff_t k0, ptrdiff_t kc,
                   ptrdiff_t k, ptrdiff_t j0, ptrdiff_t nc, uint16_t *dst) {
    ptrdiff_t pairs = (kc + 1) / 2;
    for (ptrdiff_t jp = 0; jp < nc; jp += NR) {
        uint16_t *d = dst + (jp / NR) * pairs * NR * 2;
        ptrdiff_t w = nc - jp < NR ? nc - jp : NR;
        for (ptrdiff_t p = 0; p < pairs; p++) {
            ptrdiff_t r0 = k0 + 2 * p, r1 = r0 + 1;
            uint16_t *row = d + p * NR * 2;
            const uint16_t *s0 = b + r0 * sk + (j0 + jp) * sn;
            const uint16_t *s1 = b + r1 * sk + (j0 + jp) * sn;
            int has1 = r1 < k && r1 < k0 + kc;
            ptrdiff_t j = 0;
            for (; j < w; j++) {
                row[2 * j] = s0[j * sn];
                row[2 * j + 1] = has1 ? s1[j * sn] : 0;
            }
            for (; j < NR; j++) row[2 * j] = row[2 * j + 1] = 0;
        }
    }
}

/* A[i0:i0+mc, k0:k0+kc] -> panels [mc/MR][kc/2 pairs][MR rows][2], zero padded */
static void pack_a(const uint16_t *a, ptrdiff_t sm, ptrdiff_t sk, ptrdiff_t i0, ptrdiff_t mc,
                   ptrdiff_t k0, ptrdiff_t kc, ptrdiff_t k, uint16_t *dst) {
    ptrdiff_t pairs = (kc + 1) / 2;
    for (ptrdiff_t ip = 0; ip < mc; ip += MR) {
        uint16_t *d = dst + (ip / MR) * pairs * MR * 2;
        ptrdiff_t h = mc - ip < MR ? mc - ip : MR;
        for (ptrdiff_t r = 0; r < MR; r++) {
            const uint16_t *s = a + (i0 + ip + r) * sm + k0 * sk;
            for (ptrdiff_t p = 0; p < pairs; p++) {
                int ok = r < h;
                ptrdiff_t c0 = 2 * p, c1 = c0 + 1;
                d[(p * MR + r) * 2] = ok ? s[c0 * sk] : 0;
                d[(p * MR + r) * 2 + 1] = ok && c1 < kc && k0 + c1 < k ? s[c1 * sk] : 0;
            }
        }
    }
}

/* C[0:h, 0:w] += Apanel @ Bpanel over `pairs` k-pairs (h <= MR, w <= NR) */
TGT static void kernel(const uint16_t *ap, const uint16_t *bp, ptrdiff_t pairs, float *c,
                       ptrdiff_t ldc, ptrdiff_t h, ptrdiff_t w) {
    __m512 acc[MR][2];
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const uint32_t *a32 = (const uint32_t *)ap;
    for (ptrdiff_t p = 0; p < pairs; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * NR * 2);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + p * NR * 2 + 32);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a32[p * MR + r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
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
        pack_a(a, a_sm, a_sk, 0, m, k0, kc, k, abuf);
        for (ptrdiff_t j0 = 0; j0 < n; j0 += NC) {
            ptrdiff_t nc = n - j0 < NC ? n - j0 : NC;
            pack_b(b, b_sk, b_sn, k0, kc, k, j0, nc, bbuf);
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
