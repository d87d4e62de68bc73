/* The norm family of the _kernels library: layer norm / RMS norm (float32, and bfloat16
 * through float32 rows) and batch norm, forward and backward. */
#include <stdlib.h>

#include "kernels_common.h"

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
