/* int8 products for quantized Linear layers with AVX512-VNNI (vpdpbusd: u8 x s8 -> s32).
 *
 * Plain C called through ctypes (backend/cpu/igemm.py), built for the CPU that compiles it;
 * without AVX512-VNNI it builds to nothing but qgemm_vnni = 0 and igemm.py uses MKL or
 * NumPy. Three steps, each the same arithmetic as the NumPy path in quant/modules.py, so
 * the results are equal bit for bit:
 *   qgemm_quantize_rows: per row s = max|x| / 127 (1 where 0, NaN where the row holds an
 *     inf or NaN: its outputs are NaN), q = rint(x / s) clamped to +-127, stored + 128 as
 *     uint8 (the unsigned operand), rows and cols padded with 128;
 *   qgemm_pack: the int8 weight [n, k] into panels of 64 columns, 4 consecutive k per
 *     32-bit lane (vpdpbusd's layout), zero padded; corr[j] = -128 * sum_k w[j, k];
 *   qgemm_u8s8: acc = (a + 128) . w + corr = a . w exactly in int32, then either stored as
 *     int32 or as float32 ((float)acc * s_row) * s_col (+ bias), in that order (no FMA);
 *   qgemm_u8s8_direct: the same for a few rows, on the unpacked weight (no packing);
 *   qgemm_dequantize: int8 / int4 weights with per-row or per-group scales to float32.
 * Arrays are C-contiguous; sizes are element counts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SHAPEFLOW_QGEMM_SOURCE
#define SHAPEFLOW_QGEMM_SOURCE "unknown"
#endif
const char shapeflow_qgemm_source[] = SHAPEFLOW_QGEMM_SOURCE;

#define MR 6  /* rows of a tile */
#define NR 64 /* columns of a tile: four zmm of 16 int32 */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>

const int qgemm_vnni = 1;

void qgemm_quantize_rows(const float *restrict x, ptrdiff_t m, ptrdiff_t k, ptrdiff_t mp,
                         ptrdiff_t kp, uint8_t *restrict out, float *restrict scales) {
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const __m512i shift = _mm512_set1_epi32(128);
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (ptrdiff_t i = 0; i < m; i++) {
        const float *row = x + i * k;
        uint8_t *o = out + i * kp;
        __m512 mx = _mm512_setzero_ps(), bad = _mm512_setzero_ps(), zero = mx;
        for (ptrdiff_t j = 0; j < k; j += 16) {
            ptrdiff_t left = k - j;
            __mmask16 t = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __m512 v = _mm512_maskz_loadu_ps(t, row + j);
            mx = _mm512_max_ps(mx, _mm512_and_ps(v, sign));
            bad = _mm512_add_ps(bad, _mm512_mul_ps(v, zero)); /* NaN once an inf or NaN */
        }
        float s = _mm512_reduce_max_ps(mx) / 127.0f;
        if (s == 0.0f) s = 1.0f;
        if (_mm512_reduce_add_ps(bad) != 0.0f) s = __builtin_nanf(""); /* a NaN output row */
        scales[i] = s;
        const __m512 vs = _mm512_set1_ps(s);
        for (ptrdiff_t j = 0; j < k; j += 16) {
            ptrdiff_t left = k - j;
            __mmask16 t = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(t, row + j), vs);
            v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
            __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(v), shift);
            _mm_mask_storeu_epi8(o + j, t, _mm512_cvtepi32_epi8(q));
        }
        memset(o + k, 128, (size_t)(kp - k));
    }
    for (ptrdiff_t i = m; i < mp; i++) memset(out + i * kp, 128, (size_t)kp);
}

void qgemm_pack(const int8_t *restrict w, ptrdiff_t n, ptrdiff_t k, ptrdiff_t kp,
                int8_t *restrict packed, int32_t *restrict corr) {
    ptrdiff_t panels = (n + NR - 1) / NR;
    memset(packed, 0, (size_t)(panels * NR * kp));
    for (ptrdiff_t j = 0; j < n; j++) {
        const int8_t *row = w + j * k;
        int8_t *dst = packed + (j / NR) * NR * kp + (j % NR) * 4;
        int32_t sum = 0;
        for (ptrdiff_t c = 0; c < k; c++) sum += row[c];
        corr[j] = -128 * sum;
        ptrdiff_t c = 0;
        for (; c + 4 <= k; c += 4) memcpy(dst + c * NR, row + c, 4);
        for (; c < k; c++) dst[(c / 4) * NR * 4 + (c % 4)] = row[c];
    }
}

static inline void store_tile(__m512i acc, ptrdiff_t row, ptrdiff_t col, ptrdiff_t n,
                              const int32_t *corr, const float *rs, const float *cs,
                              const float *bias, float *of, int32_t *oi) {
    ptrdiff_t left = n - col;
    if (left <= 0) return;
    __mmask16 t = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    acc = _mm512_add_epi32(acc, _mm512_maskz_loadu_epi32(t, corr + col));
    if (oi) {
        _mm512_mask_storeu_epi32(oi + row * n + col, t, acc);
        return;
    }
    __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(rs[row]));
    y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(t, cs + col));
    if (bias) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(t, bias + col));
    _mm512_mask_storeu_ps(of + row * n + col, t, y);
}

/* One MR x NR tile over k in [c0, c1): 24 accumulators named one by one, so that the
 * compiler keeps them all in registers (an array of them was spilled every step); they
 * start from zero (first) or from io, and end in io ([MR, NR] int32, row stride NR). */
#define ACC(i) __m512i a##i##0, a##i##1, a##i##2, a##i##3
#define INIT(i)                                                                         \
    a##i##0 = first ? _mm512_setzero_si512() : _mm512_loadu_si512(io + i * NR);          \
    a##i##1 = first ? _mm512_setzero_si512() : _mm512_loadu_si512(io + i * NR + 16);     \
    a##i##2 = first ? _mm512_setzero_si512() : _mm512_loadu_si512(io + i * NR + 32);     \
    a##i##3 = first ? _mm512_setzero_si512() : _mm512_loadu_si512(io + i * NR + 48)
#define STEP(i)                                                                         \
    {                                                                                   \
        int32_t v;                                                                      \
        memcpy(&v, ap + i * kp + c, 4);                                                 \
        __m512i av = _mm512_set1_epi32(v);                                              \
        a##i##0 = _mm512_dpbusd_epi32(a##i##0, av, b0);                                 \
        a##i##1 = _mm512_dpbusd_epi32(a##i##1, av, b1);                                 \
        a##i##2 = _mm512_dpbusd_epi32(a##i##2, av, b2);                                 \
        a##i##3 = _mm512_dpbusd_epi32(a##i##3, av, b3);                                 \
    }
#define SAVE(i)                                                                         \
    _mm512_storeu_si512(io + i * NR, a##i##0);                                          \
    _mm512_storeu_si512(io + i * NR + 16, a##i##1);                                     \
    _mm512_storeu_si512(io + i * NR + 32, a##i##2);                                     \
    _mm512_storeu_si512(io + i * NR + 48, a##i##3)

static inline void micro(const uint8_t *restrict ap, ptrdiff_t kp, const int8_t *restrict bp,
                         ptrdiff_t c0, ptrdiff_t c1, int32_t *restrict io, int first) {
    ACC(0); ACC(1); ACC(2); ACC(3); ACC(4); ACC(5);
    INIT(0); INIT(1); INIT(2); INIT(3); INIT(4); INIT(5);
    for (ptrdiff_t c = c0; c < c1; c += 4) {
        const int8_t *b = bp + c * NR;
        __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64);
        __m512i b2 = _mm512_loadu_si512(b + 128), b3 = _mm512_loadu_si512(b + 192);
        STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5)
    }
    SAVE(0); SAVE(1); SAVE(2); SAVE(3); SAVE(4); SAVE(5);
}

/* a: [mp, kp] uint8 (mp a multiple of MR), packed: qgemm_pack's panels; out [m, n].
 * k runs in blocks of KC so that a panel's block (KC * NR bytes) stays in L1 while every
 * tile of rows passes over it; the partial sums wait in `part` ([mp, NR] int32, in L2).
 * MR is 6: micro() names six rows of accumulators. */
#define KC 256
void qgemm_u8s8(const uint8_t *restrict a, ptrdiff_t m, ptrdiff_t kp,
                const int8_t *restrict packed, ptrdiff_t n, const int32_t *restrict corr,
                const float *restrict row_scale, const float *restrict col_scale,
                const float *restrict bias, float *restrict out_f32,
                int32_t *restrict out_i32) {
    ptrdiff_t panels = (n + NR - 1) / NR, mp = (m + MR - 1) / MR * MR;
    int32_t *part = kp > KC ? (int32_t *)malloc((size_t)(mp * NR) * sizeof(int32_t)) : NULL;
    ptrdiff_t kc = part ? KC : kp; /* no memory for the partial sums: one block */
    int32_t tile[MR * NR];
    for (ptrdiff_t p = 0; p < panels; p++) {
        const int8_t *bp = packed + p * NR * kp;
        for (ptrdiff_t c0 = 0; c0 < kp; c0 += kc) {
            ptrdiff_t c1 = c0 + kc < kp ? c0 + kc : kp;
            int first = c0 == 0, last = c1 == kp;
            for (ptrdiff_t i0 = 0; i0 < m; i0 += MR) {
                int32_t *io = part ? part + i0 * NR : tile;
                micro(a + i0 * kp, kp, bp, c0, c1, io, first);
                if (!last) continue;
                for (int i = 0; i < MR && i0 + i < m; i++)
                    for (int j = 0; j < 4; j++)
                        store_tile(_mm512_loadu_si512(io + i * NR + j * 16), i0 + i,
                                   p * NR + j * 16, n, corr, row_scale, col_scale, bias,
                                   out_f32, out_i32);
            }
        }
    }
    free(part);
}

/* Few rows (a GEMV, as in generation): no packing; each weight row is read once for up to
 * DR rows of a, 64 bytes at a time, and its sum (for the +128 correction) comes from the
 * same loads. a: [m, kp] uint8 (padded with 128 past k), w: [n, k] int8 unpacked. */
#define DR 8
void qgemm_u8s8_direct(const uint8_t *restrict a, ptrdiff_t m, ptrdiff_t kp,
                       const int8_t *restrict w, ptrdiff_t n, ptrdiff_t k,
                       const float *restrict row_scale, const float *restrict col_scale,
                       const float *restrict bias, float *restrict out_f32,
                       int32_t *restrict out_i32) {
    const __m512i ones = _mm512_set1_epi8(1);
    for (ptrdiff_t i0 = 0; i0 < m; i0 += DR) {
        int rows = m - i0 < DR ? (int)(m - i0) : DR;
        for (ptrdiff_t j = 0; j < n; j++) {
            const int8_t *wr = w + j * k;
            __m512i acc[DR], sum = _mm512_setzero_si512();
            for (int i = 0; i < DR; i++) acc[i] = _mm512_setzero_si512();
            for (ptrdiff_t c = 0; c < k; c += 64) {
                ptrdiff_t left = k - c;
                __mmask64 t = left >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << left) - 1);
                __m512i wv = _mm512_maskz_loadu_epi8(t, wr + c);
                sum = _mm512_dpbusd_epi32(sum, ones, wv);
                for (int i = 0; i < rows; i++)
                    acc[i] = _mm512_dpbusd_epi32(
                        acc[i], _mm512_maskz_loadu_epi8(t, a + (i0 + i) * kp + c), wv);
            }
            int32_t corr = -128 * _mm512_reduce_add_epi32(sum);
            for (int i = 0; i < rows; i++) {
                int32_t v = _mm512_reduce_add_epi32(acc[i]) + corr;
                ptrdiff_t at = (i0 + i) * n + j;
                if (out_i32) {
                    out_i32[at] = v;
                } else {
                    float y = ((float)v * row_scale[i0 + i]) * col_scale[j];
                    out_f32[at] = bias ? y + bias[j] : y;
                }
            }
        }
    }
}

/* Weight-only layers: the float32 weight [n, k] from int8 (bits 8) or packed int4 (bits 4,
 * two a byte, low nibble first) with one scale per g inputs of a row: (float)q * scale, one
 * rounding, as QuantizedTensor.dequantize_numpy computes it. */
void qgemm_dequantize(const uint8_t *restrict q, int bits, ptrdiff_t n, ptrdiff_t k,
                      ptrdiff_t g, const float *restrict scales, float *restrict out) {
    ptrdiff_t groups = k / g, row_bytes = bits == 4 ? (k + 1) / 2 : k;
    for (ptrdiff_t j = 0; j < n; j++) {
        const uint8_t *r = q + j * row_bytes;
        const float *s = scales + j * groups;
        float *o = out + j * k;
        for (ptrdiff_t c0 = 0; c0 < k; c0 += g) {
            float sc = s[c0 / g];
            if (bits == 4 && g % 32 == 0) { /* 16 bytes -> 32 values, interleaved back */
                const __m512i idx_lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18,
                                                        2, 17, 1, 16, 0);
                const __m512i idx_hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27,
                                                        11, 26, 10, 25, 9, 24, 8);
                const __m512i m15 = _mm512_set1_epi32(15), m8 = _mm512_set1_epi32(8);
                const __m512 vs = _mm512_set1_ps(sc);
                for (ptrdiff_t c = c0; c < c0 + g; c += 32) {
                    __m512i b =
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const void *)(r + c / 2)));
                    __m512i lo = _mm512_and_si512(b, m15), hi = _mm512_srli_epi32(b, 4);
                    lo = _mm512_sub_epi32(_mm512_xor_si512(lo, m8), m8); /* sign-extend */
                    hi = _mm512_sub_epi32(_mm512_xor_si512(hi, m8), m8);
                    __m512 fl = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), vs);
                    __m512 fh = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), vs);
                    _mm512_storeu_ps(o + c, _mm512_permutex2var_ps(fl, idx_lo, fh));
                    _mm512_storeu_ps(o + c + 16, _mm512_permutex2var_ps(fl, idx_hi, fh));
                }
            } else if (bits == 4 && g % 2 == 0) { /* whole bytes: two values each, no branch */
                const uint8_t *b = r + c0 / 2;
                float *d = o + c0;
                for (ptrdiff_t i = 0; i < g / 2; i++) {
                    d[2 * i] = (float)(((b[i] & 15) ^ 8) - 8) * sc;
                    d[2 * i + 1] = (float)(((b[i] >> 4) ^ 8) - 8) * sc;
                }
            } else if (bits == 4) {
                for (ptrdiff_t c = c0; c < c0 + g; c++) {
                    int nib = (c & 1) ? r[c >> 1] >> 4 : r[c >> 1] & 15;
                    o[c] = (float)((nib ^ 8) - 8) * sc;
                }
            } else {
                for (ptrdiff_t c = c0; c < c0 + g; c++) o[c] = (float)(int8_t)r[c] * sc;
            }
        }
    }
}

#else

const int qgemm_vnni = 0;

#endif

const int qgemm_mr = MR;
const int qgemm_nr = NR;
