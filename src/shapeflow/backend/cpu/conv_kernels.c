/* Convolution-family kernels (ops/conv/conv2d.py, ops/nn/group_norm.py), float32 and float64.
 *
 * Plain C over C-contiguous arrays, loaded with ctypes by backend/cpu/conv_kernels.py; each has a
 * NumPy fallback there. No fast-math: NaN, inf and rounding stay IEEE, and the copies are
 * exact. Built with the package (setup.py), for the CPU that compiles it.
 *
 * - im2col / col2im in NCHW order (Caffe's): one image [C, H, W] <-> rows k = (c, i, j) of
 *   taps by columns (oy, ox) of output pixels, for a range of output rows [oy0, oy1) of
 *   nimg consecutive images (image t's columns start at t * (oy1 - oy0) * ow). A column
 *   block then feeds one gemm W [O, C*kh*kw] @ cols, whose result is already NCHW; a
 *   caller picks row ranges so that a block stays in cache, where the whole im2col of a
 *   9x9 layer would not (2592 x 16384 floats per 128x128 image).
 * - instance norm: statistics, normalization and the per-channel affine in one pass over
 *   each [L] plane, and its backward (dx, and dw/db summed over the batch) in two.
 */

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "isa.h"

/* The instruction sets this build assumes: conv_kernels.py refuses a library built for a CPU
 * with more of them than the one it runs on. */
const char shapeflow_conv_isa[] = SHAPEFLOW_ISA;

#ifndef SHAPEFLOW_CONV_SOURCE
#define SHAPEFLOW_CONV_SOURCE "unknown"
#endif
const char shapeflow_conv_source[] = SHAPEFLOW_CONV_SOURCE;

/* The output columns [lo, hi) whose tap at input offset ox * s + off lies in [0, W). */
static inline void valid_range(ptrdiff_t off, ptrdiff_t s, ptrdiff_t W, ptrdiff_t ow,
                               ptrdiff_t *lo, ptrdiff_t *hi) {
    ptrdiff_t a = off < 0 ? (-off + s - 1) / s : 0;
    ptrdiff_t b = W - 1 - off < 0 ? 0 : (W - 1 - off) / s + 1;
    a = a > ow ? ow : a;
    b = b > ow ? ow : b;
    *lo = a;
    *hi = b < a ? a : b;
}

#define DEFINE_IM2COL(T, SUFFIX)                                                              \
    void im2col_##SUFFIX(const T *restrict x, T *restrict cols, ptrdiff_t ld, ptrdiff_t nimg, \
                         ptrdiff_t C, ptrdiff_t H, ptrdiff_t W, ptrdiff_t pt, ptrdiff_t pl,    \
                         ptrdiff_t oy0, ptrdiff_t oy1, ptrdiff_t ow, ptrdiff_t kh,             \
                         ptrdiff_t kw, ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t dh,              \
                         ptrdiff_t dw) {                                                       \
        ptrdiff_t span = (oy1 - oy0) * ow;                                                    \
        for (ptrdiff_t c = 0; c < C; c++)                                                     \
            for (ptrdiff_t i = 0; i < kh; i++)                                                \
                for (ptrdiff_t j = 0; j < kw; j++)                                            \
                    for (ptrdiff_t n = 0; n < nimg; n++) {                                    \
                        const T *xi = x + n * C * H * W;                                      \
                        T *row = cols + ((c * kh + i) * kw + j) * ld + n * span;              \
                        ptrdiff_t off = j * dw - pl, lo, hi;                                  \
                        valid_range(off, sw, W, ow, &lo, &hi);                                \
                        for (ptrdiff_t oy = oy0; oy < oy1; oy++) {                            \
                            T *d = row + (oy - oy0) * ow;                                     \
                            ptrdiff_t iy = oy * sh - pt + i * dh;                             \
                            if (iy < 0 || iy >= H) {                                          \
                                memset(d, 0, (size_t)ow * sizeof(T));                         \
                                continue;                                                     \
                            }                                                                 \
                            const T *src = xi + (c * H + iy) * W + off;                       \
                            for (ptrdiff_t ox = 0; ox < lo; ox++) d[ox] = 0;                  \
                            if (sw == 1)                                                      \
                                memcpy(d + lo, src + lo, (size_t)(hi - lo) * sizeof(T));      \
                            else                                                              \
                                for (ptrdiff_t ox = lo; ox < hi; ox++) d[ox] = src[ox * sw];  \
                            for (ptrdiff_t ox = hi; ox < ow; ox++) d[ox] = 0;                 \
                        }                                                                     \
                    }                                                                         \
    }

/* The adjoint: dx[image] += each column entry at the input position it was read from (dx
 * zeroed by the caller; padding positions are dropped). */
#define DEFINE_COL2IM(T, SUFFIX)                                                              \
    void col2im_##SUFFIX(const T *restrict cols, T *restrict dx, ptrdiff_t ld,               \
                         ptrdiff_t nimg, ptrdiff_t C, ptrdiff_t H, ptrdiff_t W, ptrdiff_t pt, \
                         ptrdiff_t pl, ptrdiff_t oy0, ptrdiff_t oy1, ptrdiff_t ow,             \
                         ptrdiff_t kh, ptrdiff_t kw, ptrdiff_t sh, ptrdiff_t sw,              \
                         ptrdiff_t dh, ptrdiff_t dw) {                                         \
        ptrdiff_t span = (oy1 - oy0) * ow;                                                    \
        for (ptrdiff_t c = 0; c < C; c++)                                                     \
            for (ptrdiff_t i = 0; i < kh; i++)                                                \
                for (ptrdiff_t j = 0; j < kw; j++)                                            \
                    for (ptrdiff_t n = 0; n < nimg; n++) {                                    \
                        T *xi = dx + n * C * H * W;                                           \
                        const T *row = cols + ((c * kh + i) * kw + j) * ld + n * span;        \
                        ptrdiff_t off = j * dw - pl, lo, hi;                                  \
                        valid_range(off, sw, W, ow, &lo, &hi);                                \
                        for (ptrdiff_t oy = oy0; oy < oy1; oy++) {                            \
                            ptrdiff_t iy = oy * sh - pt + i * dh;                             \
                            if (iy < 0 || iy >= H) continue;                                  \
                            const T *d = row + (oy - oy0) * ow;                               \
                            T *dst = xi + (c * H + iy) * W + off;                             \
                            if (sw == 1) {                                                    \
                                _Pragma("omp simd")                                           \
                                for (ptrdiff_t ox = lo; ox < hi; ox++) dst[ox] += d[ox];      \
                            } else {                                                          \
                                for (ptrdiff_t ox = lo; ox < hi; ox++) dst[ox * sw] += d[ox]; \
                            }                                                                 \
                        }                                                                     \
                    }                                                                         \
    }

DEFINE_IM2COL(float, f32)
DEFINE_IM2COL(double, f64)
DEFINE_COL2IM(float, f32)
DEFINE_COL2IM(double, f64)

/* ---- instance norm over x [N * C, L] (plane r is channel r % C) ----------------------
 * out = (x - mean_r) * rstd_r * w[c] + b[c] with the biased variance (two passes: the mean,
 * then squared deviations; vector lanes sum in T, the division is in double); w and b may be
 * NULL. mean and rstd [N * C] are what backward keeps. */
#define DEFINE_INSTANCE_NORM(T, SUFFIX)                                                       \
    void instance_norm_##SUFFIX(const T *restrict x, const T *restrict w,                    \
                                const T *restrict b, T *restrict out, T *restrict mean,       \
                                T *restrict rstd, ptrdiff_t rows, ptrdiff_t C, ptrdiff_t L,   \
                                double eps) {                                                 \
        for (ptrdiff_t r = 0; r < rows; r++) {                                                \
            const T *xr = x + r * L;                                                          \
            T *o = out + r * L;                                                               \
            T s = 0;                                                                          \
            _Pragma("omp simd reduction(+ : s)")                                              \
            for (ptrdiff_t l = 0; l < L; l++) s += xr[l];                                     \
            T m = (T)((double)s / (double)L), q = 0;                                          \
            _Pragma("omp simd reduction(+ : q)")                                              \
            for (ptrdiff_t l = 0; l < L; l++) {                                               \
                T d = xr[l] - m;                                                              \
                q += d * d;                                                                   \
            }                                                                                 \
            T rs = (T)(1.0 / sqrt((double)q / (double)L + eps));                              \
            ptrdiff_t c = r % C;                                                              \
            T scale = w ? rs * w[c] : rs, shift = b ? b[c] : 0;                               \
            _Pragma("omp simd")                                                               \
            for (ptrdiff_t l = 0; l < L; l++) o[l] = (xr[l] - m) * scale + shift;             \
            mean[r] = m;                                                                      \
            rstd[r] = rs;                                                                     \
        }                                                                                     \
    }

/* Backward: per plane sum_g = sum g, dot = sum g (x - mean); k1 = rstd w, k2 = -k1 rstd^2
 * dot / L, k3 = -k1 sum_g / L - mean k2; dx = g k1 + x k2 + k3 (dx may be NULL when the
 * input needs no gradient); dw[c] += dot rstd, db[c] += sum_g over the batch, in double
 * (dw and db may be NULL). */
#define DEFINE_INSTANCE_NORM_BACKWARD(T, SUFFIX)                                              \
    void instance_norm_backward_##SUFFIX(const T *restrict g, const T *restrict x,           \
                                         const T *restrict mean, const T *restrict rstd,      \
                                         const T *restrict w, T *restrict dx,                 \
                                         double *restrict dw, double *restrict db,            \
                                         ptrdiff_t rows, ptrdiff_t C, ptrdiff_t L) {          \
        for (ptrdiff_t r = 0; r < rows; r++) {                                                \
            const T *gr = g + r * L, *xr = x + r * L;                                         \
            T m = mean[r], rs = rstd[r], a = 0, d = 0;                                        \
            _Pragma("omp simd reduction(+ : a, d)")                                           \
            for (ptrdiff_t l = 0; l < L; l++) {                                               \
                a += gr[l];                                                                   \
                d += gr[l] * (xr[l] - m);                                                     \
            }                                                                                 \
            ptrdiff_t c = r % C;                                                              \
            if (dw) dw[c] += (double)d * (double)rs;                                          \
            if (db) db[c] += (double)a;                                                       \
            if (!dx) continue;                                                                \
            T k1 = w ? rs * w[c] : rs, n = (T)L;                                              \
            T k2 = -k1 * rs * rs * d / n, k3 = -k1 * a / n - m * k2;                          \
            T *o = dx + r * L;                                                                \
            _Pragma("omp simd")                                                               \
            for (ptrdiff_t l = 0; l < L; l++) o[l] = (gr[l] * k1 + xr[l] * k2) + k3;          \
        }                                                                                     \
    }

DEFINE_INSTANCE_NORM(float, f32)
DEFINE_INSTANCE_NORM(double, f64)
DEFINE_INSTANCE_NORM_BACKWARD(float, f32)
DEFINE_INSTANCE_NORM_BACKWARD(double, f64)

/* ---- Winograd F(2x2, 3x3), float32: 3x3 stride-1 convolutions with 2.25x fewer products --
 * Tiles of 2x2 outputs read 4x4 inputs at (2 ty - pt, 2 tx - pl); reads outside the image
 * are zeros (padding). Transformed tiles are laid out [16][channel][tile], tile t of image n
 * of a block at n * (ty1 - ty0) * tw + (ty - ty0) * tw + tx, rows ld apart, so that each of
 * the 16 positions is one gemm [O, C] @ [C, tiles]. B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0;
 * 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1]; the weight transforms (G w G^T, and G^T dU G for
 * the weight gradient) are small and done by the caller. */
/* One input row iy of a plane, split into its even and odd columns from 2 * tx - pl: e[tx]
 * = row[2 tx - pl], o[tx] = row[2 tx + 1 - pl] for tx in [0, tw] (zeros outside [0, W)). */
static void split_row(const float *restrict plane, ptrdiff_t iy, ptrdiff_t H, ptrdiff_t W,
                      ptrdiff_t pl, ptrdiff_t tw, float *restrict e, float *restrict o) {
    if (iy < 0 || iy >= H) {
        memset(e, 0, (size_t)(tw + 1) * sizeof(float));
        memset(o, 0, (size_t)(tw + 1) * sizeof(float));
        return;
    }
    const float *row = plane + iy * W;
    for (ptrdiff_t tx = 0; tx <= tw; tx++) {
        ptrdiff_t a = 2 * tx - pl, b = a + 1;
        e[tx] = (a >= 0 && a < W) ? row[a] : 0.0f;
        o[tx] = (b >= 0 && b < W) ? row[b] : 0.0f;
    }
}

/* V[16][C][tiles] <- B^T d B, a row of tw tiles at a time: each output run is contiguous. */
void winograd_input_f32(const float *restrict x, float *restrict V, ptrdiff_t ld,
                        ptrdiff_t nimg, ptrdiff_t C, ptrdiff_t H, ptrdiff_t W, ptrdiff_t pt,
                        ptrdiff_t pl, ptrdiff_t ty0, ptrdiff_t ty1, ptrdiff_t tw) {
    ptrdiff_t span = (ty1 - ty0) * tw, cs = C * ld;
    float e[4][tw + 1], o[4][tw + 1], h[4][4][tw];
    for (ptrdiff_t c = 0; c < C; c++)
        for (ptrdiff_t n = 0; n < nimg; n++) {
            const float *plane = x + (n * C + c) * H * W;
            for (ptrdiff_t ty = ty0; ty < ty1; ty++) {
                for (int r = 0; r < 4; r++) {
                    split_row(plane, 2 * ty - pt + r, H, W, pl, tw, e[r], o[r]);
                    /* d_s = row[2 tx + s]: d0 = e[tx], d1 = o[tx], d2 = e[tx+1], d3 = o[tx+1] */
                    for (ptrdiff_t tx = 0; tx < tw; tx++) {
                        float d0 = e[r][tx], d1 = o[r][tx], d2 = e[r][tx + 1], d3 = o[r][tx + 1];
                        h[r][0][tx] = d0 - d2;
                        h[r][1][tx] = d1 + d2;
                        h[r][2][tx] = d2 - d1;
                        h[r][3][tx] = d1 - d3;
                    }
                }
                float *v = V + c * ld + n * span + (ty - ty0) * tw;
                for (int s = 0; s < 4; s++) {
                    float *v0 = v + s * cs, *v1 = v + (4 + s) * cs, *v2 = v + (8 + s) * cs,
                          *v3 = v + (12 + s) * cs;
                    for (ptrdiff_t tx = 0; tx < tw; tx++) {
                        v0[tx] = h[0][s][tx] - h[2][s][tx];
                        v1[tx] = h[1][s][tx] + h[2][s][tx];
                        v2[tx] = h[2][s][tx] - h[1][s][tx];
                        v3[tx] = h[1][s][tx] - h[3][s][tx];
                    }
                }
            }
        }
}

/* out[n, o] tiles = A^T M A, cropped to [oh, ow]; M is [16][O][tiles] as above. */
void winograd_output_f32(const float *restrict M, float *restrict out, ptrdiff_t ld,
                         ptrdiff_t nimg, ptrdiff_t O, ptrdiff_t oh, ptrdiff_t ow,
                         ptrdiff_t ty0, ptrdiff_t ty1, ptrdiff_t tw) {
    ptrdiff_t span = (ty1 - ty0) * tw, os = O * ld;
    float t[2][4][tw], y[2][2][tw];
    for (ptrdiff_t o = 0; o < O; o++)
        for (ptrdiff_t n = 0; n < nimg; n++) {
            float *plane = out + (n * O + o) * oh * ow;
            for (ptrdiff_t ty = ty0; ty < ty1; ty++) {
                const float *m = M + o * ld + n * span + (ty - ty0) * tw;
                for (int s = 0; s < 4; s++) {
                    const float *m0 = m + s * os, *m1 = m + (4 + s) * os,
                                *m2 = m + (8 + s) * os, *m3 = m + (12 + s) * os;
                    for (ptrdiff_t tx = 0; tx < tw; tx++) {
                        t[0][s][tx] = m0[tx] + m1[tx] + m2[tx];
                        t[1][s][tx] = m1[tx] - m2[tx] - m3[tx];
                    }
                }
                for (int r = 0; r < 2; r++)
                    for (ptrdiff_t tx = 0; tx < tw; tx++) {
                        y[r][0][tx] = t[r][0][tx] + t[r][1][tx] + t[r][2][tx];
                        y[r][1][tx] = t[r][1][tx] - t[r][2][tx] - t[r][3][tx];
                    }
                for (int r = 0; r < 2 && 2 * ty + r < oh; r++) {
                    float *row = plane + (2 * ty + r) * ow;
                    ptrdiff_t full = ow / 2;
                    for (ptrdiff_t tx = 0; tx < full; tx++) {
                        row[2 * tx] = y[r][0][tx];
                        row[2 * tx + 1] = y[r][1][tx];
                    }
                    if (ow % 2) row[ow - 1] = y[r][0][full];
                }
            }
        }
}

/* The adjoint of winograd_output: dM = A dY A^T for each tile's 2x2 gradient dY (zeros
 * past [oh, ow]), written [16][O][tiles]. */
void winograd_output_grad_f32(const float *restrict g, float *restrict dM, ptrdiff_t ld,
                              ptrdiff_t nimg, ptrdiff_t O, ptrdiff_t oh, ptrdiff_t ow,
                              ptrdiff_t ty0, ptrdiff_t ty1, ptrdiff_t tw) {
    ptrdiff_t span = (ty1 - ty0) * tw, os = O * ld;
    float dy[2][2][tw + 1], a[4][2][tw];
    for (ptrdiff_t o = 0; o < O; o++)
        for (ptrdiff_t n = 0; n < nimg; n++) {
            const float *plane = g + (n * O + o) * oh * ow;
            for (ptrdiff_t ty = ty0; ty < ty1; ty++) {
                for (int r = 0; r < 2; r++)  /* dy[r][s][tx] = g[2 ty + r, 2 tx + s] */
                    split_row(plane, 2 * ty + r, oh, ow, 0, tw, dy[r][0], dy[r][1]);
                for (int s = 0; s < 2; s++)
                    for (ptrdiff_t tx = 0; tx < tw; tx++) {
                        float d0 = dy[0][s][tx], d1 = dy[1][s][tx];
                        a[0][s][tx] = d0;
                        a[1][s][tx] = d0 + d1;
                        a[2][s][tx] = d0 - d1;
                        a[3][s][tx] = -d1;
                    }
                float *m = dM + o * ld + n * span + (ty - ty0) * tw;
                for (int r = 0; r < 4; r++) {
                    float *m0 = m + (4 * r) * os, *m1 = m + (4 * r + 1) * os,
                          *m2 = m + (4 * r + 2) * os, *m3 = m + (4 * r + 3) * os;
                    for (ptrdiff_t tx = 0; tx < tw; tx++) {
                        float a0 = a[r][0][tx], a1 = a[r][1][tx];
                        m0[tx] = a0;
                        m1[tx] = a0 + a1;
                        m2[tx] = a0 - a1;
                        m3[tx] = -a1;
                    }
                }
            }
        }
}
