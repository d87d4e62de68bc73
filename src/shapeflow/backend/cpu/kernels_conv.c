/* The conv family of the _kernels library: im2col and col2im, around the products. */
#include "kernels_common.h"

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
