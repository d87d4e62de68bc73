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

/* Interleave two 32-lane rows of 16-bit values: lo = x0[0], x1[0], ..., x0[15], x1[15];
 * hi the same for lanes 16..31 (the pair layout vdpbf16ps reads). */
static const uint16_t interleave_lo[32] __attribute__((aligned(64))) = {
    0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
    8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
static const uint16_t interleave_hi[32] __attribute__((aligned(64))) = {
    16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
    24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};

static inline __mmask32 lanes32(ptrdiff_t w) {
    return w >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << w) - 1);
}

/* B[k0:k0+kc, j0:j0+nc] -> panels [nc/NR][kc/2 pairs][NR cols][2], zero padded.
 * Fast paths: rows contiguous (two rows interleaved by a permute, ragged widths masked)
 * and columns contiguous (each pair is one 32-bit word of a column); else element by
 * element. */
TGT static void pack_b(const uint16_t *b, ptrdiff_t sk, ptrdiff_t sn, ptrdiff_t k0,
                       ptrdiff_t kc, ptrdiff_t j0, ptrdiff_t nc, uint16_t *dst) {
    ptrdiff_t pairs = (kc + 1) / 2, full = kc / 2;
    const __m512i ilo = _mm512_load_si512(interleave_lo), ihi = _mm512_load_si512(interleave_hi);
    for (ptrdiff_t jp = 0; jp < nc; jp += NR) {
        uint16_t *d = dst + (jp / NR) * pairs * NR * 2;
        ptrdiff_t w = nc - jp < NR ? nc - jp : NR;
        const uint16_t *base = b + k0 * sk + (j0 + jp) * sn;
        if (sn == 1) {
            __mmask32 lm = lanes32(w);
            for (ptrdiff_t p = 0; p < pairs; p++) {
                __m512i r0 = _mm512_maskz_loadu_epi16(lm, base + 2 * p * sk);
                __m512i r1 = p < full ? _mm512_maskz_loadu_epi16(lm, base + (2 * p + 1) * sk)
                                      : _mm512_setzero_si512();
                _mm512_storeu_si512(d + p * NR * 2, _mm512_permutex2var_epi16(r0, ilo, r1));
                _mm512_storeu_si512(d + p * NR * 2 + 32, _mm512_permutex2var_epi16(r0, ihi, r1));
            }
            continue;
        }
        if (sk == 1) {
            uint32_t *d32 = (uint32_t *)d;
            ptrdiff_t j = 0;
            for (; j < w; j++) {
                const uint16_t *col = base + j * sn;
                for (ptrdiff_t p = 0; p < full; p++) {
                    uint32_t v;
                    memcpy(&v, col + 2 * p, 4);
                    d32[p * NR + j] = v;
                }
                if (pairs > full) d32[full * NR + j] = col[2 * full];
            }
            for (; j < NR; j++)
                for (ptrdiff_t p = 0; p < pairs; p++) d32[p * NR + j] = 0;
            continue;
        }
        for (ptrdiff_t p = 0; p < pairs; p++) {
            const uint16_t *s0 = base + 2 * p * sk, *s1 = s0 + sk;
            uint16_t *row = d + p * NR * 2;
            int has1 = p < full;
            ptrdiff_t j = 0;
            for (; j < w; j++) {
                row[2 * j] = s0[j * sn];
                row[2 * j + 1] = has1 ? s1[j * sn] : 0;
            }
            for (; j < NR; j++) row[2 * j] = row[2 * j + 1] = 0;
        }
    }
}

/* A[i0:i0+mc, k0:k0+kc] -> panels [mc/MR][kc/2 pairs][MR rows][2], zero padded.
 * Fast paths: rows contiguous (each pair one 32-bit word of a row, full panels) and
 * columns contiguous (two columns of MR rows interleaved by a permute); else element by
 * element. */
TGT static void pack_a(const uint16_t *a, ptrdiff_t sm, ptrdiff_t sk, ptrdiff_t i0,
                       ptrdiff_t mc, ptrdiff_t k0, ptrdiff_t kc, uint16_t *dst) {
    ptrdiff_t pairs = (kc + 1) / 2, full = kc / 2;
    const __m512i ilo = _mm512_load_si512(interleave_lo);
    for (ptrdiff_t ip = 0; ip < mc; ip += MR) {
        uint16_t *d = dst + (ip / MR) * pairs * MR * 2;
        ptrdiff_t h = mc - ip < MR ? mc - ip : MR;
        const uint16_t *base = a + (i0 + ip) * sm + k0 * sk;
        if (sk == 1 && h == MR) {
            uint32_t *d32 = (uint32_t *)d;
            const uint16_t *rows[MR];
            for (int r = 0; r < MR; r++) rows[r] = base + r * sm;
            for (ptrdiff_t p = 0; p < full; p++) {
#pragma GCC unroll 12
                for (int r = 0; r < MR; r++) {
                    uint32_t v;
                    memcpy(&v, rows[r] + 2 * p, 4);
                    d32[p * MR + r] = v;
                }
            }
            if (pairs > full)
                for (int r = 0; r < MR; r++) d32[full * MR + r] = rows[r][2 * full];
            continue;
        }
        if (sm == 1) {
            __mmask32 lm = lanes32(h);
            for (ptrdiff_t p = 0; p < pairs; p++) {
                __m512i c0 = _mm512_maskz_loadu_epi16(lm, base + 2 * p * sk);
                __m512i c1 = p < full ? _mm512_maskz_loadu_epi16(lm, base + (2 * p + 1) * sk)
                                      : _mm512_setzero_si512();
                _mm512_mask_storeu_epi16(d + p * MR * 2, lanes32(2 * MR),
                                         _mm512_permutex2var_epi16(c0, ilo, c1));
            }
            continue;
        }
        for (ptrdiff_t r = 0; r < MR; r++) {
            const uint16_t *s = base + r * sm;
            for (ptrdiff_t p = 0; p < pairs; p++) {
                int ok = r < h;
                d[(p * MR + r) * 2] = ok ? s[2 * p * sk] : 0;
                d[(p * MR + r) * 2 + 1] = ok && p < full ? s[(2 * p + 1) * sk] : 0;
            }
        }
    }
}

/* C[0:h, 0:w] += Apanel @ Bpanel over `pairs` k-pairs (h <= MR, w <= NR) */
TGT __attribute__((noinline)) static void kernel(const uint16_t *ap, const uint16_t *bp, ptrdiff_t pairs, float *c,
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

/* float32 -> bfloat16 by round to nearest even, NaN -> 0x7fc0 with its sign: the bits
 * ml_dtypes and kernels.c's narrowing give (vcvtneps2bf16 would flush subnormals). */
TGT static inline __m512i round_bf16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    __m512i q = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)),
        _mm512_set1_epi32(0x7fc0));
    return _mm512_mask_mov_epi32(r, nan, q);
}

/* acc = Apanel @ Bpanel over np k-pairs, in registers (inlined into tile_bf16) */
TGT static inline __attribute__((always_inline)) void dots(const uint16_t *ap,
                                                           const uint16_t *bp, ptrdiff_t np,
                                                           __m512 acc[MR][2]) {
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const uint32_t *a32 = (const uint32_t *)ap;
    for (ptrdiff_t p = 0; p < np; p++) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * NR * 2);
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + p * NR * 2 + 32);
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            __m512bh av = (__m512bh)_mm512_set1_epi32((int)a32[p * MR + r]);
            acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
            acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
        }
    }
}

/* c[0:h, 0:w] (bfloat16) = round(bias + Apanel @ Bpanel) over all `pairs` k-pairs, the
 * float32 sum built exactly as bf16gemm() builds its float32 output: bias (or +0), then
 * each KC block's register sum added in k order. All blocks but the last go through a
 * 12x32 float32 tile on the stack; the last is added in registers and rounded. */
TGT static void tile_bf16(const uint16_t *ap, const uint16_t *bp, ptrdiff_t pairs,
                          const float *bias, uint16_t *c, ptrdiff_t ldc, ptrdiff_t h,
                          ptrdiff_t w) {
    float t[MR * NR] __attribute__((aligned(64)));
    __m512 acc[MR][2];
    __mmask16 m0 = w >= 16 ? 0xFFFF : (__mmask16)((1u << w) - 1);
    __mmask16 m1 = w >= 32 ? 0xFFFF : w <= 16 ? 0 : (__mmask16)((1u << (w - 16)) - 1);
    __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
    ptrdiff_t last = pairs <= KC / 2 ? 0 : (pairs - 1) / (KC / 2) * (KC / 2);
    if (last > 0) {
        for (int r = 0; r < MR; r++) {
            _mm512_store_ps(t + r * NR, b0);
            _mm512_store_ps(t + r * NR + 16, b1);
        }
        for (ptrdiff_t p0 = 0; p0 < last; p0 += KC / 2)
            kernel(ap + p0 * MR * 2, bp + p0 * NR * 2, KC / 2, t, NR, MR, NR);
    }
    dots(ap + last * MR * 2, bp + last * NR * 2, pairs - last, acc);
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        if (r >= h) break;
        __m512 s0 = last > 0 ? _mm512_load_ps(t + r * NR) : b0;
        __m512 s1 = last > 0 ? _mm512_load_ps(t + r * NR + 16) : b1;
        _mm512_mask_cvtepi32_storeu_epi16(c + r * ldc, m0,
                                          round_bf16(_mm512_add_ps(s0, acc[r][0])));
        _mm512_mask_cvtepi32_storeu_epi16(c + r * ldc + 16, m1,
                                          round_bf16(_mm512_add_ps(s1, acc[r][1])));
    }
}

/* c (bfloat16, row stride ldc) = round(bias + a @ b): no float32 m x n array. B is packed
 * once (k x n, the operand's size), A per block of mc rows over all of k (mc*k*2 bytes,
 * mc chosen to keep that block in L2); each 12x32 tile then runs over all of k, so its
 * value is bf16gemm()'s float32 result for the same operands, rounded once. bias: n
 * float32 or NULL. Returns 0, or -1 when the packing buffers cannot be allocated. */
TGT int bf16gemm_bf16(const uint16_t *a, ptrdiff_t a_sm, ptrdiff_t a_sk, const uint16_t *b,
                      ptrdiff_t b_sk, ptrdiff_t b_sn, const float *bias, uint16_t *c,
                      ptrdiff_t ldc, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k) {
    if (m <= 0 || n <= 0) return 0;
    if (k < 0) k = 0;
    ptrdiff_t pairs = (k + 1) / 2, npan = (n + NR - 1) / NR;
    ptrdiff_t mc = (131072 / (k + 1)) / MR * MR;  /* A block ~256 KB */
    mc = mc < MR ? MR : mc > 16 * MR ? 16 * MR : mc;
    uint16_t *bbuf = aligned_alloc(64, ((size_t)npan * NR * pairs * 4 + 127) / 64 * 64);
    uint16_t *abuf = aligned_alloc(64, ((size_t)mc * pairs * 4 + 127) / 64 * 64);
    if (!abuf || !bbuf) { free(abuf); free(bbuf); return -1; }
    pack_b(b, b_sk, b_sn, 0, k, 0, n, bbuf);
    for (ptrdiff_t i0 = 0; i0 < m; i0 += mc) {
        ptrdiff_t rows = m - i0 < mc ? m - i0 : mc;
        pack_a(a, a_sm, a_sk, i0, rows, 0, k, abuf);
        for (ptrdiff_t jp = 0; jp < n; jp += NR) {
            ptrdiff_t w = n - jp < NR ? n - jp : NR;
            const uint16_t *bp = bbuf + (jp / NR) * pairs * NR * 2;
            for (ptrdiff_t ir = 0; ir < rows; ir += MR) {
                ptrdiff_t h = rows - ir < MR ? rows - ir : MR;
                tile_bf16(abuf + (ir / MR) * pairs * MR * 2, bp, pairs, bias ? bias + jp : NULL,
                          c + (i0 + ir) * ldc + jp, ldc, h, w);
            }
        }
    }
    free(abuf);
    free(bbuf);
    return 0;
}
