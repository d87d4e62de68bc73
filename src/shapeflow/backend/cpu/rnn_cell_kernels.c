/* The LSTM cell's step (nn.LSTMCell) in one call each way, float32 and float64.
 *
 * Plain C called through ctypes (backend/cpu/rnn_cell_kernels.py), built for the CPU that
 * compiles it. A cell stepped from Python runs one op per step, so what the step costs
 * beyond its products is call overhead: here one call does the whole step. Forward: gates
 * = b_ih + b_hh + x W_ih^T + h W_hh^T (two BLAS products), then i, f, g, o activated, c' =
 * f c + i g and h' = o tanh(c') in one pass. Backward: the gate gradients in one pass, then
 * dx, dh, dW_ih, dW_hh (four products) and the bias gradient.
 *
 * The products go through the cblas ?gemm whose address the caller passes (MKL's, as
 * backend/cpu/gemm.py loads it); with NULL the caller does them (NumPy's BLAS) and the kernel
 * does only the pointwise part: forward then reads pre-activations from `gates`, backward
 * stops after the gate gradients and dc.
 *
 * Layouts (counted in elements): x [B, F] rows ldx apart (F == 1 or unit column stride),
 * h, c [B, H] and weights contiguous; gates [B, 4H] (i, f, g, o) holds the activated gates
 * after forward, what backward reads; out [2, B, H] holds h' then c'.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "isa.h"

/* Which instruction sets this build assumes: the loader refuses a library built for a CPU
 * with more of them than the one it runs on. */
const char shapeflow_rnn_cell_isa[] = SHAPEFLOW_ISA;

/* The SHA-256 of the source this library was built from (setup.py defines it). */
#ifndef SHAPEFLOW_RNN_CELL_SOURCE
#define SHAPEFLOW_RNN_CELL_SOURCE "unknown"
#endif
const char shapeflow_rnn_cell_source[] = SHAPEFLOW_RNN_CELL_SOURCE;

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*gemm_f64)(int, int, int, int, int, int, double, const double *, int,
                         const double *, int, double, double *, int);
typedef void (*gemm_f32)(int, int, int, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);

/* ---- float64 activations, branch-free so that the row loops vectorize ----------------- */

/* e^x for x <= 0: x = n ln2 + r (|r| <= ln2/2, fdlibm's two-part ln2), e^r by its Taylor
 * series to r^13 (truncation < 5e-18 relative), 2^n as two exponent-bit factors so that n
 * down to -1075 reaches the subnormals. ~1 ulp; 0 below -745.2 (and for NaN: the callers
 * select NaN themselves). */
static inline double exp_nonpos_f64(double x) {
    int under = !(x >= -745.2);
    double xc = under ? 0.0 : x;
    double n = floor(fma(xc, 1.4426950408889634074, 0.5));
    double r = fma(n, -6.93147180369123816490e-01, xc);
    r = fma(n, -1.90821492927058770002e-10, r);
    double p = 1.0 / 6227020800.0;
    p = fma(p, r, 1.0 / 479001600.0);
    p = fma(p, r, 1.0 / 39916800.0);
    p = fma(p, r, 1.0 / 3628800.0);
    p = fma(p, r, 1.0 / 362880.0);
    p = fma(p, r, 1.0 / 40320.0);
    p = fma(p, r, 1.0 / 5040.0);
    p = fma(p, r, 1.0 / 720.0);
    p = fma(p, r, 1.0 / 120.0);
    p = fma(p, r, 1.0 / 24.0);
    p = fma(p, r, 1.0 / 6.0);
    p = fma(p, r, 0.5);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    int64_t k = (int64_t)n, k1 = k >> 1, k2 = k - k1; /* each in [-538, 0] */
    int64_t b1 = (k1 + 1023) << 52, b2 = (k2 + 1023) << 52;
    double s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    double e = p * s1 * s2;
    return under ? 0.0 : e;
}

/* tanh: |x| < 0.625 by Cephes' rational form x + x z P(z) / Q(z), else 1 - 2e / (1 + e)
 * with e = exp(-2|x|) <= 0.287 (no cancellation there); NaN stays NaN, +-inf gives +-1. */
static inline double tanh_f64(double x) {
    double a = fabs(x), z = x * x;
    double p = fma(fma(-9.64399179425052238628e-1, z, -9.92877231001918586564e1), z,
                   -1.61468768441708447952e3);
    double q = fma(fma(z + 1.12811678491632931402e2, z, 2.23548839060100448583e3), z,
                   4.84406305325125486048e3);
    double small = fma(x * z, p / q, x);
    double e = exp_nonpos_f64(-2.0 * a);
    double big = copysign(1.0 - 2.0 * e / (1.0 + e), x);
    double t = a < 0.625 ? small : big;
    return x == x ? t : x;
}

/* sigmoid from e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) below; NaN stays NaN. */
static inline double sigmoid_f64(double x) {
    double e = exp_nonpos_f64(-fabs(x));
    double r = 1.0 / (1.0 + e);
    double s = x >= 0.0 ? r : e * r;
    return x == x ? s : x;
}

/* ---- float32 activations: the fused LSTM layer's (kernels.c, "recurrent cells"), so a
 * cell loop and the layer round alike ------------------------------------------------------ */

static inline float exp_nonpos_f32(float x) {
    int under = !(x >= -87.3f);
    float xc = under ? 0.0f : x;
    float n = rintf(xc * 1.44269504088896341f);
    float r = xc - n * 0.693145751953125f; /* exact: the constant has 12 significant bits */
    r = r - n * 1.42860682030941723e-6f;
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23; /* n in [-126, 0] */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = p * scale;
    return under ? 0.0f : e;
}

static inline float tanh_f32(float x) {
    float a = fabsf(x), z = x * x;
    float p = -5.70498872745e-3f;
    p = fmaf(p, z, 2.06390887954e-2f);
    p = fmaf(p, z, -5.37397155531e-2f);
    p = fmaf(p, z, 1.33314422036e-1f);
    p = fmaf(p, z, -3.33332819422e-1f);
    float small = fmaf(p * z, x, x);
    float e = exp_nonpos_f32(-2.0f * a);
    float big = copysignf(1.0f - 2.0f * e / (1.0f + e), x);
    float r = a < 0.625f ? small : big;
    return x == x ? r : x;
}

static inline float sigmoid_f32(float x) {
    float e = exp_nonpos_f32(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    float s = x >= 0.0f ? r : e * r;
    return x == x ? s : x;
}

/* ---- the step, once per dtype ----------------------------------------------------------- */

/* forward: see the file's comment. b_ih, b_hh may be NULL (no bias). */
#define LSTM_CELL_FORWARD(T, SUF, SIG, TANH)                                                 \
    void lstm_cell_step_##SUF(gemm_##SUF gemm, const T *restrict x, ptrdiff_t ldx,           \
                              ptrdiff_t F, const T *restrict h, const T *restrict c,         \
                              const T *restrict w_ih, const T *restrict w_hh,                \
                              const T *restrict b_ih, const T *restrict b_hh,                \
                              T *restrict gates, T *restrict out, ptrdiff_t B, ptrdiff_t H) { \
        ptrdiff_t G = 4 * H;                                                                 \
        if (B == 0 || H == 0) return;                                                        \
        if (gemm) {                                                                          \
            for (ptrdiff_t r = 0; r < B; r++) {                                              \
                T *g = gates + r * G;                                                        \
                if (b_ih) {                                                                  \
                    _Pragma("omp simd") for (ptrdiff_t j = 0; j < G; j++) g[j] = b_ih[j] + b_hh[j]; \
                } else {                                                                     \
                    for (ptrdiff_t j = 0; j < G; j++) g[j] = 0;                              \
                }                                                                            \
            }                                                                                \
            if (F > 0)                                                                       \
                gemm(ROW_MAJOR, NO_TRANS, TRANS, (int)B, (int)G, (int)F, 1, x,               \
                     (int)(ldx > F ? ldx : F), w_ih, (int)F, 1, gates, (int)G);              \
            gemm(ROW_MAJOR, NO_TRANS, TRANS, (int)B, (int)G, (int)H, 1, h, (int)H, w_hh,     \
                 (int)H, 1, gates, (int)G);                                                  \
        }                                                                                    \
        T *hout = out, *cout = out + B * H;                                                  \
        for (ptrdiff_t r = 0; r < B; r++) {                                                  \
            T *gi = gates + r * G, *gf = gi + H, *gg = gi + 2 * H, *go = gi + 3 * H;         \
            const T *cr = c + r * H;                                                         \
            T *hr = hout + r * H, *cn = cout + r * H;                                        \
            _Pragma("omp simd") for (ptrdiff_t j = 0; j < H; j++) {                          \
                T i = SIG(gi[j]), f = SIG(gf[j]), u = TANH(gg[j]), o = SIG(go[j]);           \
                T cv = f * cr[j] + i * u;                                                    \
                gi[j] = i;                                                                   \
                gf[j] = f;                                                                   \
                gg[j] = u;                                                                   \
                go[j] = o;                                                                   \
                cn[j] = cv;                                                                  \
                hr[j] = o * TANH(cv);                                                        \
            }                                                                                \
        }                                                                                    \
    }

/* backward. dout [2, B, H]: the gradients of h' and c'; cn: c' (tanh(c') is recomputed);
 * dg [B, 4H] <- the pre-activation gradients; dc (may be NULL) <- dc' f + the part through
 * h'. With gemm: dx [B, F], dh [B, H], dw_ih [4H, F], dw_hh [4H, H] (each may be NULL:
 * not wanted) <- the products, db_ih and db_hh (may be NULL) <- the column sums of dg. */
#define LSTM_CELL_BACKWARD(T, SUF, TANH)                                                     \
    void lstm_cell_step_backward_##SUF(                                                      \
        gemm_##SUF gemm, const T *restrict dout, const T *restrict gates,                    \
        const T *restrict c, const T *restrict cn, const T *restrict x, ptrdiff_t ldx,       \
        ptrdiff_t F, const T *restrict h, const T *restrict w_ih, const T *restrict w_hh,    \
        T *restrict dg, T *restrict dx, T *restrict dh, T *restrict dc, T *restrict dw_ih,  \
        T *restrict dw_hh, T *restrict db_ih, T *restrict db_hh, ptrdiff_t B, ptrdiff_t H) { \
        ptrdiff_t G = 4 * H;                                                                 \
        const T *dhs = dout, *dcs = dout + B * H;                                            \
        for (ptrdiff_t r = 0; r < B; r++) {                                                  \
            const T *gi = gates + r * G, *gf = gi + H, *gg = gi + 2 * H, *go = gi + 3 * H;   \
            const T *cr = c + r * H, *cnr = cn + r * H, *dhr = dhs + r * H;                  \
            const T *dcr = dcs + r * H;                                                      \
            T *di = dg + r * G, *df = di + H, *dgg = di + 2 * H, *dq = di + 3 * H;           \
            T *dcp = dc ? dc + r * H : NULL;                                                 \
            _Pragma("omp simd") for (ptrdiff_t j = 0; j < H; j++) {                          \
                T i = gi[j], f = gf[j], u = gg[j], o = go[j], d = dhr[j];                    \
                T tc = TANH(cnr[j]);                                                         \
                T dcv = dcr[j] + d * o * (1 - tc * tc);                                      \
                di[j] = dcv * u * (i - i * i);                                               \
                df[j] = dcv * cr[j] * (f - f * f);                                           \
                dgg[j] = dcv * i * (1 - u * u);                                              \
                dq[j] = d * tc * (o - o * o);                                                \
                if (dcp) dcp[j] = dcv * f;                                                   \
            }                                                                                \
        }                                                                                    \
        if (!gemm) return;                                                                   \
        if (B == 0 || H == 0) { /* empty products: the gradients that have entries are 0 */  \
            if (dx) memset(dx, 0, (size_t)(B * F) * sizeof(T));                              \
            if (dw_ih) memset(dw_ih, 0, (size_t)(G * F) * sizeof(T));                        \
            if (dw_hh) memset(dw_hh, 0, (size_t)(G * H) * sizeof(T));                        \
            if (db_ih) memset(db_ih, 0, (size_t)G * sizeof(T));                              \
            if (db_hh) memset(db_hh, 0, (size_t)G * sizeof(T));                              \
            return;                                                                          \
        }                                                                                    \
        int lx = (int)(ldx > F ? ldx : F);                                                   \
        if (dx && F > 0)                                                                     \
            gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, (int)B, (int)F, (int)G, 1, dg, (int)G, w_ih, \
                 (int)F, 0, dx, (int)F);                                                     \
        if (dh)                                                                              \
            gemm(ROW_MAJOR, NO_TRANS, NO_TRANS, (int)B, (int)H, (int)G, 1, dg, (int)G, w_hh, \
                 (int)H, 0, dh, (int)H);                                                     \
        if (dw_ih && F > 0)                                                                  \
            gemm(ROW_MAJOR, TRANS, NO_TRANS, (int)G, (int)F, (int)B, 1, dg, (int)G, x, lx, 0, \
                 dw_ih, (int)F);                                                             \
        if (dw_hh)                                                                           \
            gemm(ROW_MAJOR, TRANS, NO_TRANS, (int)G, (int)H, (int)B, 1, dg, (int)G, h,       \
                 (int)H, 0, dw_hh, (int)H);                                                  \
        if (db_ih) {                                                                         \
            for (ptrdiff_t j = 0; j < G; j++) db_ih[j] = 0;                                  \
            for (ptrdiff_t r = 0; r < B; r++) {                                              \
                const T *row = dg + r * G;                                                   \
                _Pragma("omp simd") for (ptrdiff_t j = 0; j < G; j++) db_ih[j] += row[j];    \
            }                                                                                \
            if (db_hh) memcpy(db_hh, db_ih, (size_t)G * sizeof(T));                          \
        }                                                                                    \
    }

LSTM_CELL_FORWARD(double, f64, sigmoid_f64, tanh_f64)
LSTM_CELL_FORWARD(float, f32, sigmoid_f32, tanh_f32)
LSTM_CELL_BACKWARD(double, f64, tanh_f64)
LSTM_CELL_BACKWARD(float, f32, tanh_f32)

/* Elementwise activations over n values (tests compare them with libm's at the edges). */
void rnn_cell_sigmoid_f64(const double *restrict x, double *restrict y, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t j = 0; j < n; j++) y[j] = sigmoid_f64(x[j]);
}

void rnn_cell_tanh_f64(const double *restrict x, double *restrict y, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t j = 0; j < n; j++) y[j] = tanh_f64(x[j]);
}
