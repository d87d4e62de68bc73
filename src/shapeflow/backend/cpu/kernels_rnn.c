/* The rnn family of the _kernels library: LSTM and GRU cells, forward and backward. */
#include "kernels_common.h"

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
