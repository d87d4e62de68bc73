/* The optim family of the _kernels library: the fused optimizer updates. */
#include "kernels_common.h"

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
