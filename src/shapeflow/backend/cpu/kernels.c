/* Fused float32 CPU kernels for the ops whose NumPy form takes many passes over memory.
 *
 * Plain C called through ctypes (backend/cpu/kernels.py), built for the CPU that compiles it.
 * Each kernel computes what the NumPy code beside its op computes, in one or two passes:
 * GELU (the same table interpolation as ops/gelu_kernels.py, bit for bit) and layer norm
 * (row statistics in float32 lanes, the weight gradient summed in float64).
 * Arrays are C-contiguous float32; sizes are counts of elements.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Which instruction sets this build assumes: kernels.py refuses to call into a library
 * built for a CPU with more of them than the one it runs on. */
const char shapeflow_isa[] = ""
#ifdef __SSE4_1__
    " sse4_1"
#endif
#ifdef __AVX__
    " avx"
#endif
#ifdef __AVX2__
    " avx2"
#endif
#ifdef __FMA__
    " fma"
#endif
#ifdef __F16C__
    " f16c"
#endif
#ifdef __BMI2__
    " bmi2"
#endif
#ifdef __AVX512F__
    " avx512f"
#endif
#ifdef __AVX512BW__
    " avx512bw"
#endif
#ifdef __AVX512DQ__
    " avx512dq"
#endif
#ifdef __AVX512VL__
    " avx512vl"
#endif
    ;

/* The SHA-256 of the kernels.c this library was built from (setup.py defines it):
 * kernels.py refuses a library built from another version of this file. */
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

/* ---- layer norm / RMS norm over rows of n ------------------------------------------ */
static float row_mean(const float *restrict x, ptrdiff_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (ptrdiff_t j = 0; j < n; j++) s += x[j];
    return s / (float)n;
}

/* out = (x - mean) * rstd * w + b per row; mean (unless rms) and rstd per row. w, b may be
 * NULL; mean may be NULL when rms. */
void layer_norm_f32(const float *restrict x, const float *restrict w, const float *restrict b,
                    float *restrict out, float *restrict mean, float *restrict rstd,
                    ptrdiff_t rows, ptrdiff_t n, float eps, int rms) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *o = out + r * n;
        float m = rms ? 0.0f : row_mean(xr, n);
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (ptrdiff_t j = 0; j < n; j++) {
            float d = xr[j] - m;
            ss += d * d;
        }
        float rs = 1.0f / sqrtf(ss / (float)n + eps);
        if (!rms) mean[r] = m;
        rstd[r] = rs;
        if (w && b) {
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) o[j] = (xr[j] - m) * rs * w[j] + b[j];
        } else if (w) {
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) o[j] = (xr[j] - m) * rs * w[j];
        } else if (b) {
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) o[j] = (xr[j] - m) * rs + b[j];
        } else {
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) o[j] = (xr[j] - m) * rs;
        }
    }
}

/* dx = rstd * (dxhat - xhat * mean(dxhat * xhat) - mean(dxhat)) with dxhat = g * w (the
 * last term only for layer norm); dw += sum over rows of g * xhat when dw is not NULL.
 * mean is NULL for rms; w may be NULL. dw is float64 [n], zeroed by the caller. */
void layer_norm_backward_f32(const float *restrict g, const float *restrict x,
                             const float *restrict mean, const float *restrict rstd,
                             const float *restrict w, float *restrict dx,
                             double *restrict dw, ptrdiff_t rows, ptrdiff_t n) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *gr = g + r * n, *xr = x + r * n;
        float *o = dx + r * n;
        float m = mean ? mean[r] : 0.0f, rs = rstd[r];
        float s_dx = 0.0f, s_d = 0.0f;
        if (w) {
#pragma omp simd reduction(+ : s_dx, s_d)
            for (ptrdiff_t j = 0; j < n; j++) {
                float xh = (xr[j] - m) * rs, dh = gr[j] * w[j];
                s_dx += dh * xh;
                s_d += dh;
            }
        } else {
#pragma omp simd reduction(+ : s_dx, s_d)
            for (ptrdiff_t j = 0; j < n; j++) {
                float xh = (xr[j] - m) * rs;
                s_dx += gr[j] * xh;
                s_d += gr[j];
            }
        }
        float c1 = s_dx / (float)n, c2 = mean ? s_d / (float)n : 0.0f;
        if (w) {
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) {
                float xh = (xr[j] - m) * rs;
                o[j] = rs * (gr[j] * w[j] - xh * c1 - c2);
            }
        } else {
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) {
                float xh = (xr[j] - m) * rs;
                o[j] = rs * (gr[j] - xh * c1 - c2);
            }
        }
        if (dw) {
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) dw[j] += (double)(gr[j] * ((xr[j] - m) * rs));
        }
    }
}

/* ---- Adam / AdamW: one update in place, in optim/adam.py's order of float32 steps ----
 * m += (g - m) * w1;  v = v * beta2 + (g * w2) * g;  vmax = max(vmax, v) (amsgrad);
 * p += m / (sqrt(v or vmax) / bc2_sqrt + eps) * neg_step. vmax may be NULL. */
void adam_f32(float *restrict p, const float *restrict g, float *restrict m,
              float *restrict v, float *restrict vmax, ptrdiff_t n, float w1, float beta2,
              float w2, float bc2_sqrt, float eps, float neg_step) {
    if (vmax) {
        for (ptrdiff_t i = 0; i < n; i++) {
            float mi = m[i] + (g[i] - m[i]) * w1;
            float vi = v[i] * beta2 + (g[i] * w2) * g[i];
            float top = (vmax[i] > vi || vmax[i] != vmax[i]) ? vmax[i] : vi; /* np.maximum */
            m[i] = mi;
            v[i] = vi;
            vmax[i] = top;
            p[i] += mi / (sqrtf(top) / bc2_sqrt + eps) * neg_step;
        }
    } else {
        for (ptrdiff_t i = 0; i < n; i++) {
            float mi = m[i] + (g[i] - m[i]) * w1;
            float vi = v[i] * beta2 + (g[i] * w2) * g[i];
            m[i] = mi;
            v[i] = vi;
            p[i] += mi / (sqrtf(vi) / bc2_sqrt + eps) * neg_step;
        }
    }
}

/* y += x * alpha (optim's axpy_, the same rounding: the product, then the sum) */
void axpy_f32(float *restrict y, const float *restrict x, ptrdiff_t n, float alpha) {
    for (ptrdiff_t i = 0; i < n; i++) y[i] += x[i] * alpha;
}

/* ---- softmax over rows -------------------------------------------------------------
 * exp for x <= 0 (softmax shifts by the row max first): 2^n * e^r with n = round(x/ln 2),
 * r = x - n ln 2 split in two parts (exact products), e^r by its Taylor series to r^7
 * (|r| <= ln2/2: truncation < 2e-9 relative), 2^n from the exponent bits. Max error
 * ~2 ulp; below -87.3 (results under float32's smallest normal) it gives 0, as a flush. */
static inline float exp_nonpositive(float x) {
    int under = !(x >= -87.3f); /* also NaN: handled by the caller's NaN sum */
    float xc = under ? 0.0f : x;
    float n = rintf(xc * 1.44269504088896341f);
    float r = xc - n * 0.693145751953125f; /* exact: the constant has 12 significant bits */
    r = r - n * 1.42860682030941723e-6f;
    /* fused multiply-adds (fmaf): half the instructions, and each step rounds once */
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    union { float f; int32_t i; } scale;
    scale.i = ((int32_t)n + 127) << 23; /* n in [-126, 0] */
    float e = p * scale.f;
    return under ? 0.0f : e;
}

/* In place over rows of n: x = softmax(x * scale), with positions j > (r % period) + shift
 * masked out when period > 0 (causal attention over [.., L, S] scores: period L, shift
 * S - L... or 0 for PyTorch's top-left alignment). A row whose every entry is -inf becomes 0
 * when zero_empty, NaN otherwise; a NaN or +inf anywhere in a row makes the row NaN. */
void softmax_rows_f32(float *restrict x, ptrdiff_t rows, ptrdiff_t n, float scale,
                      ptrdiff_t period, int zero_empty) {
    ptrdiff_t query = 0; /* r % period, counted rather than divided */
    for (ptrdiff_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        /* entries 0 .. keep-1 count; the loops run to a whole number of vectors past keep
         * (masked by a select), so short causal rows need no scalar remainder loops */
        ptrdiff_t keep = period > 0 ? query + 1 : n;
        if (period > 0 && ++query == period) query = 0;
        if (keep > n) keep = n;
        ptrdiff_t end = (keep + 15) & ~(ptrdiff_t)15; /* whole vectors, masked past keep */
        if (end > n) end = n;
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (ptrdiff_t j = 0; j < end; j++) {
            float v = j < keep ? row[j] * scale : -INFINITY;
            m = v > m ? v : m;
        }
        float s = 0.0f;
        if (m == INFINITY) { /* as PyTorch: x - max is NaN at a +inf entry: the row is NaN */
            for (ptrdiff_t j = 0; j < n; j++) row[j] = j < keep ? NAN : 0.0f;
            continue;
        }
        {
            if (m == -INFINITY) m = 0.0f; /* every entry -inf (or NaN): exp gives 0 */
#pragma omp simd reduction(+ : s)
            for (ptrdiff_t j = 0; j < end; j++) {
                float d = row[j] * scale - m; /* <= 0, or NaN */
                float e = exp_nonpositive(d);
                e = d == d ? e : d;
                e = j < keep ? e : 0.0f;
                row[j] = e;
                s += e;
            }
        }
        if (s == 0.0f || s != s || s == INFINITY) { /* keep NumPy's 0/0 and inf/inf */
            for (ptrdiff_t j = 0; j < keep; j++) row[j] = zero_empty && s == 0.0f ? 0.0f : row[j] / s;
        } else {
            float inv_sum = 1.0f / s;
#pragma omp simd
            for (ptrdiff_t j = 0; j < end; j++) row[j] = row[j] * inv_sum;
        }
        for (ptrdiff_t j = end; j < n; j++) row[j] = 0.0f;
    }
}

/* dx = scale * p * (g - sum_j p g) per row of n (softmax's backward, no dropout mask) */
void softmax_backward_f32(const float *restrict p, const float *restrict g,
                          float *restrict dx, ptrdiff_t rows, ptrdiff_t n, float scale) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *pr = p + r * n, *gr = g + r * n;
        float *o = dx + r * n;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (ptrdiff_t j = 0; j < n; j++) s += pr[j] * gr[j];
#pragma omp simd
        for (ptrdiff_t j = 0; j < n; j++) o[j] = scale * (pr[j] * (gr[j] - s));
    }
}

/* ---- cross-entropy with class-index targets, no weights, no smoothing ---------------
 * Forward: lse[r] = logsumexp(x[r]) in float64 (m + log(sum exp(x - m)), m the row max);
 * returns the sum over rows whose target is not `ignore` of (m - x[r, t[r]]) + log(sum) in
 * *loss (float64) and their number in *count. The loss never subtracts x[r, t[r]] from a
 * rounded logsumexp: at logits of 1e5 float32's spacing (0.008) would be the loss's error.
 * Rows at `ignore` are left out unread (they may hold NaN or inf: masked padding) with
 * lse 0. Returns -1 when done, or the first row whose target is out of range or whose row
 * max is not finite: the caller's NumPy path then raises (or gives its NaN). */
ptrdiff_t cross_entropy_f32(const float *restrict x, const int64_t *restrict t,
                            double *restrict lse, ptrdiff_t rows, ptrdiff_t n, int64_t ignore,
                            double *loss, ptrdiff_t *count) {
    double total = 0.0;
    ptrdiff_t valid = 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *row = x + r * n;
        int64_t target = t[r];
        if (target == ignore) {
            lse[r] = 0.0;
            continue;
        }
        if (target < 0 || target >= n) return r;
        float m = -INFINITY;
#pragma omp simd reduction(max : m)
        for (ptrdiff_t j = 0; j < n; j++) m = row[j] > m ? row[j] : m;
        if (!(m > -INFINITY && m < INFINITY)) return r;
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (ptrdiff_t j = 0; j < n; j++) {
            float d = row[j] - m; /* NaN where row[j] is: the max skips it, the sum must not */
            float e = exp_nonpositive(d);
            s += d == d ? e : d;
        }
        if (s != s) return r; /* a NaN logit: NumPy's path gives the NaN loss */
        double ls = log((double)s);
        lse[r] = (double)m + ls;
        total += ((double)m - (double)row[target]) + ls;
        valid++;
    }
    *loss = total;
    *count = valid;
    return -1;
}

/* Backward: dx[r] = (softmax(x[r]) - onehot(t[r])) * scale, 0 for ignored rows. lse is
 * split as hi + lo (hi its float32 rounding): exp(x - lse) = exp(x - hi) * exp(-lo), the
 * second factor folded into the row's scale, so the float32 loop loses nothing to hi's
 * rounding and costs what it did. Returns -1, or the first row whose lse is not finite (a
 * forward that NumPy ran on a row with inf or NaN): the caller's NumPy path then gives its
 * NaN, which the exp here would flush to 0. */
ptrdiff_t cross_entropy_backward_f32(const float *restrict x, const int64_t *restrict t,
                                     const double *restrict lse, float *restrict dx,
                                     ptrdiff_t rows, ptrdiff_t n, int64_t ignore, float scale) {
    for (ptrdiff_t r = 0; r < rows; r++)
        if (!(lse[r] > -INFINITY && lse[r] < INFINITY) && t[r] != ignore) return r;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *row = x + r * n;
        float *o = dx + r * n;
        int64_t target = t[r];
        if (target == ignore) {
            for (ptrdiff_t j = 0; j < n; j++) o[j] = 0.0f;
            continue;
        }
        float hi = (float)lse[r];
        float sc = scale * (float)exp((double)hi - lse[r]);
#pragma omp simd
        for (ptrdiff_t j = 0; j < n; j++) {
            float d = row[j] - hi; /* <= 0: hi >= the row max, which lse is at least */
            o[j] = exp_nonpositive(d > 0.0f ? 0.0f : d) * sc;
        }
        if (target >= 0 && target < n) o[target] -= scale; /* checked in forward */
    }
    return -1;
}

/* ==== bfloat16 ==========================================================================
 * bfloat16 is the top half of a float32: widening is a shift, narrowing rounds to nearest
 * even (as ml_dtypes and PyTorch do) with NaN kept NaN: 0x7fc0 or 0xffc0 by its sign, as
 * ml_dtypes writes it. Subnormals round like any other value (bfloat16 has float32's
 * exponent range). The bf16 forms of GELU, softmax, log_softmax and layer norm widen a block
 * into float32 scratch, run the float32 kernel above on it and round once: the values are
 * the float32 kernel's on the widened input, rounded, as PyTorch computes bf16 activations
 * in float32 inside. Where the CPU has AVX512-BF16 (checked at run time, not assumed by the
 * build), narrowing uses its vcvtneps2bf16, which flushes subnormals and keeps NaN payloads:
 * blocks holding those take the portable path, so both give the same bits. */
#include <stdlib.h>
#include <string.h>
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

static inline float bf16_widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
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

/* softmax (log_softmax when log) over rows of n bf16 values into out. softmax is
 * softmax_rows_f32 on each widened row; log_softmax is (x - max) - log(sum exp(x - max)).
 * Returns -1, or (log_softmax only) the first row whose max is not finite, before writing
 * anything: the caller's NumPy path handles rows with inf or NaN. -2: out of memory. */
ptrdiff_t softmax_rows_bf16(const uint16_t *restrict x, uint16_t *restrict out,
                            ptrdiff_t rows, ptrdiff_t n, int log) {
    if (log) {
        for (ptrdiff_t r = 0; r < rows; r++) {
            const uint16_t *row = x + r * n;
            float m = -INFINITY;
            for (ptrdiff_t j = 0; j < n; j++) {
                float v = bf16_widen(row[j]);
                m = v > m ? v : m;
            }
            int nan = 0;
            for (ptrdiff_t j = 0; j < n; j++) nan |= (row[j] & 0x7fff) > 0x7f80;
            if (!(m > -INFINITY && m < INFINITY) || nan) return r;
        }
    }
    float *buf = malloc((size_t)n * sizeof(float));
    if (!buf) return -2;
    for (ptrdiff_t r = 0; r < rows; r++) {
        bf16_to_f32(x + r * n, buf, n);
        if (log) {
            float m = -INFINITY, s = 0.0f;
#pragma omp simd reduction(max : m)
            for (ptrdiff_t j = 0; j < n; j++) m = buf[j] > m ? buf[j] : m;
#pragma omp simd reduction(+ : s)
            for (ptrdiff_t j = 0; j < n; j++) s += exp_nonpositive(buf[j] - m);
            float ls = logf(s);
#pragma omp simd
            for (ptrdiff_t j = 0; j < n; j++) buf[j] = (buf[j] - m) - ls;
        } else {
            softmax_rows_f32(buf, 1, n, 1.0f, 0, 0);
        }
        f32_to_bf16(buf, out + r * n, n);
    }
    free(buf);
    return -1;
}

/* layer_norm_f32 on bf16 rows: w and b in float32 (the caller widens them once), mean and
 * rstd in float32 as PyTorch keeps them; out rounded to bf16. Returns 0, or -2 when out of
 * memory. */
int layer_norm_bf16(const uint16_t *restrict x, const float *restrict w,
                    const float *restrict b, uint16_t *restrict out, float *restrict mean,
                    float *restrict rstd, ptrdiff_t rows, ptrdiff_t n, float eps, int rms) {
    float *buf = malloc(2 * (size_t)n * sizeof(float));
    if (!buf) return -2;
    for (ptrdiff_t r = 0; r < rows; r++) {
        bf16_to_f32(x + r * n, buf, n);
        layer_norm_f32(buf, w, b, buf + n, mean ? mean + r : NULL, rstd + r, 1, n, eps, rms);
        f32_to_bf16(buf + n, out + r * n, n);
    }
    free(buf);
    return 0;
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

/* ---- recurrent cells: one time step's pointwise part, forward and backward ------------
 * The recurrent op (ops/nn/recurrent_steps.py) adds h_{t-1} @ W_hh^T into the step's gate
 * rows with one gemm; these kernels do the rest of the step in one pass over the rows.
 * Every 2-D operand is rows of contiguous floats with its own row stride (ld*, counted in
 * elements): the step's rows are row blocks of the op's [N, *] buffers. Saved gates are the
 * activated ones (LSTM: i, f, g, o; GRU: r, z, n and W_hn h + b_hn), what backward reads. */

/* tanh: |x| < 0.625 by Cephes' odd polynomial (~1 ulp), else 1 - 2e / (1 + e) with
 * e = exp(-2|x|) <= 0.287 (no cancellation there); NaN stays NaN, +-inf gives +-1. */
static inline float tanh_f32(float x) {
    float a = fabsf(x), z = x * x;
    float p = -5.70498872745e-3f;
    p = fmaf(p, z, 2.06390887954e-2f);
    p = fmaf(p, z, -5.37397155531e-2f);
    p = fmaf(p, z, 1.33314422036e-1f);
    p = fmaf(p, z, -3.33332819422e-1f);
    float small = fmaf(p * z, x, x);
    float e = exp_nonpositive(-2.0f * a); /* 0 past -87.3 (and for NaN: selected away) */
    float big = copysignf(1.0f - 2.0f * e / (1.0f + e), x);
    float r = a < 0.625f ? small : big;
    return x == x ? r : x;
}

/* sigmoid from e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below (no cancellation
 * on either side); NaN stays NaN. */
static inline float sigmoid_f32(float x) {
    float e = exp_nonpositive(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    float s = x >= 0.0f ? r : e * r;
    return x == x ? s : x;
}

/* LSTM forward, rows of g [rows, 4h] holding pre-activations (i, f, g, o): g <- the
 * activated gates, c = f * c_prev + i * g, h = o * tanh(c). */
void lstm_cell_f32(float *restrict g, const float *restrict cp, ptrdiff_t ldcp,
                   float *restrict c, ptrdiff_t ldc, float *restrict hout, ptrdiff_t ldh,
                   ptrdiff_t rows, ptrdiff_t h) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        float *gi = g + r * 4 * h, *gf = gi + h, *gg = gi + 2 * h, *go = gi + 3 * h;
        const float *cpr = cp + r * ldcp;
        float *cr = c + r * ldc, *hr = hout + r * ldh;
#pragma omp simd
        for (ptrdiff_t j = 0; j < h; j++) {
            float i = sigmoid_f32(gi[j]), f = sigmoid_f32(gf[j]);
            float u = tanh_f32(gg[j]), o = sigmoid_f32(go[j]);
            float cn = f * cpr[j] + i * u;
            gi[j] = i;
            gf[j] = f;
            gg[j] = u;
            go[j] = o;
            cr[j] = cn;
            hr[j] = o * tanh_f32(cn);
        }
    }
}

/* LSTM backward of one step. dh = dh1 + dh2 (dh2 may be NULL; it is read, then zeroed: the
 * caller adds the next step's carry d W_hh into it), dc = dcs + dcc +
 * dh * o * (1 - tanh(c)^2); d (the pre-activation gradients, [rows, 4h]) = (dc * g,
 * dc * c_prev, dc * i, dh * tanh(c)) times each gate's derivative; dcc <- dc * f (the carry
 * into the step before). r_out (may be NULL) <- o * tanh(c), the projection's input. */
void lstm_cell_backward_f32(const float *restrict g, const float *restrict c, ptrdiff_t ldc,
                            const float *restrict cp, ptrdiff_t ldcp,
                            const float *restrict dh1, ptrdiff_t lddh1,
                            float *restrict dh2, const float *restrict dcs,
                            ptrdiff_t lddcs, float *restrict dcc, float *restrict d,
                            float *restrict r_out, ptrdiff_t rows, ptrdiff_t h) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *gi = g + r * 4 * h, *gf = gi + h, *gg = gi + 2 * h, *go = gi + 3 * h;
        const float *cr = c + r * ldc, *cpr = cp + r * ldcp, *dh1r = dh1 + r * lddh1;
        float *dh2r = dh2 ? dh2 + r * h : NULL;
        const float *dcsr = dcs + r * lddcs;
        float *dccr = dcc + r * h, *di = d + r * 4 * h, *df = di + h, *dg = di + 2 * h;
        float *dout = di + 3 * h;
        float *rr = r_out ? r_out + r * h : NULL;
#pragma omp simd
        for (ptrdiff_t j = 0; j < h; j++) {
            float dh = dh1r[j];
            if (dh2r) {
                dh += dh2r[j];
                dh2r[j] = 0.0f;
            }
            float i = gi[j], f = gf[j], u = gg[j], o = go[j];
            float tc = tanh_f32(cr[j]);
            float dc = (dcsr[j] + dccr[j]) + dh * o * (1.0f - tc * tc);
            di[j] = dc * u * (i - i * i);
            df[j] = dc * cpr[j] * (f - f * f);
            dg[j] = dc * i * (1.0f - u * u);
            dout[j] = dh * tc * (o - o * o);
            dccr[j] = dc * f;
            if (rr) rr[j] = o * tc;
        }
    }
}

/* GRU forward of one step: xw [rows, 3h] (x W_ih^T + b_ih) and gh [rows, 3h]
 * (h_prev W_hh^T + b_hh) give r, z = sigmoid(xw + gh), n = tanh(xw_n + r * gh_n),
 * h = (h_prev - n) * z + n; g [rows, 4h] <- r, z, n, gh_n. */
void gru_cell_f32(const float *restrict xw, ptrdiff_t ldxw, const float *restrict gh,
                  const float *restrict hp, ptrdiff_t ldhp, float *restrict g,
                  float *restrict hout, ptrdiff_t ldh, ptrdiff_t rows, ptrdiff_t h) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *xr = xw + r * ldxw, *ghr = gh + r * 3 * h, *hpr = hp + r * ldhp;
        float *gr = g + r * 4 * h, *hr = hout + r * ldh;
#pragma omp simd
        for (ptrdiff_t j = 0; j < h; j++) {
            float rg = sigmoid_f32(xr[j] + ghr[j]);
            float z = sigmoid_f32(xr[h + j] + ghr[h + j]);
            float ghn = ghr[2 * h + j];
            float n = tanh_f32(xr[2 * h + j] + rg * ghn);
            gr[j] = rg;
            gr[h + j] = z;
            gr[2 * h + j] = n;
            gr[3 * h + j] = ghn;
            hr[j] = (hpr[j] - n) * z + n;
        }
    }
}

/* GRU backward of one step: dh = ds + dhc; dxw [rows, 3h] <- the gradients of the three
 * input pre-activations, dgh [rows, 3h] <- those of W_hh h + b_hh (r and z shared, n times
 * r); dhc <- dh * z, to which the caller adds dgh W_hh. */
void gru_cell_backward_f32(const float *restrict g, const float *restrict hp,
                           const float *restrict ds, ptrdiff_t ldds, float *restrict dhc,
                           float *restrict dxw, float *restrict dgh, ptrdiff_t rows,
                           ptrdiff_t h) {
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *gr = g + r * 4 * h, *hpr = hp + r * h, *dsr = ds + r * ldds;
        float *dhr = dhc + r * h, *dx = dxw + r * 3 * h, *dgr = dgh + r * 3 * h;
#pragma omp simd
        for (ptrdiff_t j = 0; j < h; j++) {
            float rg = gr[j], z = gr[h + j], n = gr[2 * h + j], ghn = gr[3 * h + j];
            float dh = dsr[j] + dhr[j];
            float dz = (hpr[j] - n) * dh * (z - z * z);
            float dn = (1.0f - z) * dh * (1.0f - n * n);
            float dr = dn * ghn * (rg - rg * rg);
            dx[j] = dr;
            dx[h + j] = dz;
            dx[2 * h + j] = dn;
            dgr[j] = dr;
            dgr[h + j] = dz;
            dgr[2 * h + j] = dn * rg;
            dhr[j] = dh * z;
        }
    }
}

/* ---- batch norm over x [N, C, L] (training statistics), float32 ----------------------
 * Per channel: sums over the N rows of L in float32 lanes, added across rows in float64.
 * Forward: mean, sq = sum (x - mean)^2 (two passes: no cancellation), invstd =
 * 1 / sqrt(sq / count + eps), out = (x - mean) * (invstd * w) + b; w, b may be NULL. */
static double bn_sum(const float *restrict x, ptrdiff_t N, ptrdiff_t stride, ptrdiff_t L) {
    double s = 0.0;
    for (ptrdiff_t n = 0; n < N; n++) {
        const float *row = x + n * stride;
        float r = 0.0f;
#pragma omp simd reduction(+ : r)
        for (ptrdiff_t l = 0; l < L; l++) r += row[l];
        s += (double)r;
    }
    return s;
}

void batch_norm_f32(const float *restrict x, const float *restrict w, const float *restrict b,
                    float *restrict out, float *restrict mean, float *restrict invstd,
                    float *restrict sq, ptrdiff_t N, ptrdiff_t C, ptrdiff_t L, float eps) {
    ptrdiff_t stride = C * L;
    double count = (double)N * (double)L;
    for (ptrdiff_t c = 0; c < C; c++) {
        const float *xc = x + c * L;
        float m = (float)(bn_sum(xc, N, stride, L) / count);
        double s2 = 0.0;
        for (ptrdiff_t n = 0; n < N; n++) {
            const float *row = xc + n * stride;
            float r = 0.0f;
#pragma omp simd reduction(+ : r)
            for (ptrdiff_t l = 0; l < L; l++) {
                float d = row[l] - m;
                r += d * d;
            }
            s2 += (double)r;
        }
        float rs = 1.0f / sqrtf((float)(s2 / count) + eps);
        float scale = w ? rs * w[c] : rs, shift = b ? b[c] : 0.0f;
        for (ptrdiff_t n = 0; n < N; n++) {
            const float *row = xc + n * stride;
            float *o = out + c * L + n * stride;
#pragma omp simd
            for (ptrdiff_t l = 0; l < L; l++) o[l] = (row[l] - m) * scale + shift;
        }
        mean[c] = m;
        invstd[c] = rs;
        sq[c] = (float)s2;
    }
}

/* Backward: per channel sum_g = sum g, dot = sum g (x - mean); k1 = invstd * w,
 * k2 = -k1 invstd^2 dot / count, k3 = -k1 sum_g / count - mean k2 (training; else both
 * 0), dx = g k1 + x k2 + k3, dw = dot * invstd, db = sum_g. w may be NULL. */
void batch_norm_backward_f32(const float *restrict g, const float *restrict x,
                             const float *restrict mean, const float *restrict invstd,
                             const float *restrict w, float *restrict dx, float *restrict dw,
                             float *restrict db, ptrdiff_t N, ptrdiff_t C, ptrdiff_t L,
                             int training) {
    ptrdiff_t stride = C * L;
    float count = (float)((double)N * (double)L);
    for (ptrdiff_t c = 0; c < C; c++) {
        const float *gc = g + c * L, *xc = x + c * L;
        float m = mean[c];
        double sg = 0.0, sd = 0.0;
        for (ptrdiff_t n = 0; n < N; n++) {
            const float *gr = gc + n * stride, *xr = xc + n * stride;
            float a = 0.0f, d = 0.0f;
#pragma omp simd reduction(+ : a, d)
            for (ptrdiff_t l = 0; l < L; l++) {
                a += gr[l];
                d += gr[l] * (xr[l] - m);
            }
            sg += (double)a;
            sd += (double)d;
        }
        float sum_g = (float)sg, dot = (float)sd, rs = invstd[c];
        float k1 = w ? rs * w[c] : rs, k2 = 0.0f, k3 = 0.0f;
        if (training) {
            k2 = -k1 * rs * rs * dot / count;
            k3 = -k1 * sum_g / count - m * k2;
        }
        for (ptrdiff_t n = 0; n < N; n++) {
            const float *gr = gc + n * stride, *xr = xc + n * stride;
            float *o = dx + c * L + n * stride;
#pragma omp simd
            for (ptrdiff_t l = 0; l < L; l++) o[l] = (gr[l] * k1 + xr[l] * k2) + k3;
        }
        dw[c] = dot * rs;
        db[c] = sum_g;
    }
}

/* ---- im2col / col2im through channels-last windows, float32 --------------------------
 * x [N, C, H, W] (NCHW) <-> cols [N, oh, ow, kh, kw, C]: each window tap is C contiguous
 * floats, so the copies move whole vectors. scratch holds one image padded and channels-last
 * ([Hp, Wp, C], Hp = H + pt + pb, Wp = W + pl + pr); the padding is zeros. */
static void nhwc_windows(const float *restrict xp, float *restrict cols, ptrdiff_t Wp,
                         ptrdiff_t C, ptrdiff_t oh, ptrdiff_t ow, ptrdiff_t kh, ptrdiff_t kw,
                         ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t dh, ptrdiff_t dw) {
    for (ptrdiff_t i = 0; i < oh; i++)
        for (ptrdiff_t j = 0; j < ow; j++)
            for (ptrdiff_t ki = 0; ki < kh; ki++)
                for (ptrdiff_t kj = 0; kj < kw; kj++) {
                    const float *src = xp + ((i * sh + ki * dh) * Wp + j * sw + kj * dw) * C;
                    float *dst = cols + (((i * ow + j) * kh + ki) * kw + kj) * C;
#pragma omp simd
                    for (ptrdiff_t c = 0; c < C; c++) dst[c] = src[c];
                }
}

void im2col_f32(const float *restrict x, float *restrict cols, float *restrict scratch,
                ptrdiff_t N, ptrdiff_t C, ptrdiff_t H, ptrdiff_t W, ptrdiff_t pt, ptrdiff_t pb,
                ptrdiff_t pl, ptrdiff_t pr, ptrdiff_t oh, ptrdiff_t ow, ptrdiff_t kh,
                ptrdiff_t kw, ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t dh, ptrdiff_t dw) {
    ptrdiff_t Hp = H + pt + pb, Wp = W + pl + pr;
    for (ptrdiff_t e = 0; e < Hp * Wp * C; e++) scratch[e] = 0.0f;
    for (ptrdiff_t n = 0; n < N; n++) {
        const float *xn = x + n * C * H * W;
        for (ptrdiff_t y = 0; y < H; y++)
            for (ptrdiff_t xx = 0; xx < W; xx++) {
                float *dst = scratch + ((y + pt) * Wp + xx + pl) * C;
                const float *src = xn + y * W + xx;
                for (ptrdiff_t c = 0; c < C; c++) dst[c] = src[c * H * W];
            }
        nhwc_windows(scratch, cols + n * oh * ow * kh * kw * C, Wp, C, oh, ow, kh, kw, sh, sw,
                     dh, dw);
    }
}

/* The adjoint: dx [N, C, H, W] = the sum of each column entry at its input position (taps
 * that read padding are dropped). */
void col2im_f32(const float *restrict cols, float *restrict dx, float *restrict scratch,
                ptrdiff_t N, ptrdiff_t C, ptrdiff_t H, ptrdiff_t W, ptrdiff_t pt, ptrdiff_t pb,
                ptrdiff_t pl, ptrdiff_t pr, ptrdiff_t oh, ptrdiff_t ow, ptrdiff_t kh,
                ptrdiff_t kw, ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t dh, ptrdiff_t dw) {
    ptrdiff_t Hp = H + pt + pb, Wp = W + pl + pr;
    for (ptrdiff_t n = 0; n < N; n++) {
        for (ptrdiff_t e = 0; e < Hp * Wp * C; e++) scratch[e] = 0.0f;
        const float *cn = cols + n * oh * ow * kh * kw * C;
        for (ptrdiff_t i = 0; i < oh; i++)
            for (ptrdiff_t j = 0; j < ow; j++)
                for (ptrdiff_t ki = 0; ki < kh; ki++)
                    for (ptrdiff_t kj = 0; kj < kw; kj++) {
                        float *dst = scratch + ((i * sh + ki * dh) * Wp + j * sw + kj * dw) * C;
                        const float *src = cn + (((i * ow + j) * kh + ki) * kw + kj) * C;
#pragma omp simd
                        for (ptrdiff_t c = 0; c < C; c++) dst[c] += src[c];
                    }
        float *dn = dx + n * C * H * W;
        for (ptrdiff_t y = 0; y < H; y++)
            for (ptrdiff_t xx = 0; xx < W; xx++) {
                const float *src = scratch + ((y + pt) * Wp + xx + pl) * C;
                float *dst = dn + y * W + xx;
                for (ptrdiff_t c = 0; c < C; c++) dst[c * H * W] = src[c];
            }
    }
}

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
