/* Fused float32 CPU kernels for the ops whose NumPy form takes many passes over memory.
 *
 * Plain C called through ctypes (backend/kernels.py), built for the CPU that compiles it.
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
 * values/slopes hold entries k = 0 .. 2*offset-1 for x = (k - offset) / steps; the steps
 * mirror gelu_kernels._interp_block: v = clip(x * steps), f = floor(v), k = f + offset,
 * out = (values[k] + slopes[k] * (v - f)) * times. NaN stays NaN (its index is clamped). */
static inline float interp(float x, const float *restrict values,
                           const float *restrict slopes, float steps, float offset) {
    float v = x * steps;
    v = v < -offset ? -offset : v;
    v = v > offset - 1.0f ? offset - 1.0f : v;
    float f = floorf(v);
    float fi = f == f ? f : 0.0f; /* NaN: any index will do, the fraction is NaN */
    int k = (int)fi + (int)offset;
    int last = 2 * (int)offset - 1;
    k = k < 0 ? 0 : (k > last ? last : k);
    return values[k] + slopes[k] * (v - f);
}

/* times may be NULL (out = table(x)) */
void interp_times_f32(const float *restrict x, const float *restrict times,
                      const float *restrict values, const float *restrict slopes,
                      float *restrict out, ptrdiff_t n, float steps, float offset) {
    if (times) {
        for (ptrdiff_t i = 0; i < n; i++)
            out[i] = interp(x[i], values, slopes, steps, offset) * times[i];
    } else {
        for (ptrdiff_t i = 0; i < n; i++) out[i] = interp(x[i], values, slopes, steps, offset);
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
 * Forward: lse[r] = logsumexp(x[r]); returns the sum over rows whose target is not
 * `ignore` of lse[r] - x[r, t[r]] in *loss (float64) and their number in *count. Returns
 * -1 when done, or the first row whose target is out of range or whose row max is not
 * finite: the caller's NumPy path then raises (or handles inf/NaN) as it always has. */
ptrdiff_t cross_entropy_f32(const float *restrict x, const int64_t *restrict t,
                            float *restrict lse, ptrdiff_t rows, ptrdiff_t n, int64_t ignore,
                            double *loss, ptrdiff_t *count) {
    double total = 0.0;
    ptrdiff_t valid = 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *row = x + r * n;
        int64_t target = t[r];
        if (target != ignore && (target < 0 || target >= n)) return r;
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
        float l = m + logf(s);
        if (l != l) return r; /* a NaN logit: NumPy's path gives the NaN loss */
        lse[r] = l;
        if (target != ignore) {
            total += (double)(l - row[target]);
            valid++;
        }
    }
    *loss = total;
    *count = valid;
    return -1;
}

/* Backward: dx[r] = (softmax(x[r]) - onehot(t[r])) * scale, 0 for ignored rows. Returns -1,
 * or the first row whose lse is not finite (a forward that NumPy ran on a row with inf or
 * NaN): the caller's NumPy path then gives its NaN, which the exp here would flush to 0. */
ptrdiff_t cross_entropy_backward_f32(const float *restrict x, const int64_t *restrict t,
                                     const float *restrict lse, float *restrict dx,
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
        float l = lse[r];
#pragma omp simd
        for (ptrdiff_t j = 0; j < n; j++) {
            float d = row[j] - l;
            o[j] = exp_nonpositive(d > 0.0f ? 0.0f : d) * scale;
        }
        if (target >= 0 && target < n) o[target] -= scale; /* checked in forward */
    }
    return -1;
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
