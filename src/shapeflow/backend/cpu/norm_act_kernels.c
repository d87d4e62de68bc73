/* SiLU forward and backward in one pass each, float32 (llama's gated MLP: F.silu(a) * b).
 *
 * Plain C called through ctypes (backend/cpu/norm_act_kernels.py), built for the CPU that
 * compiles it. NumPy's SiLU takes five passes forward (neg, exp, add, divide, multiply) and
 * the composite backward six ops; here each is one vectorized loop. The formulas are
 * PyTorch's: silu(x) = x * sigmoid(x), d silu = sigmoid(x) * (1 + x * (1 - sigmoid(x))),
 * with sigmoid from e = exp(-|x|) (1 / (1 + e) at x >= 0, e / (1 + e) below: no overflow,
 * no cancellation). Arrays are C-contiguous float32; n counts elements. Non-finite inputs
 * give what PyTorch gives: NaN stays NaN, silu(+inf) = inf, silu(-inf) = NaN.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "isa.h"

/* Which instruction sets this build assumes: the loader refuses a library built for a CPU
 * with more of them than the one it runs on. */
const char shapeflow_norm_act_isa[] = SHAPEFLOW_ISA;

/* The SHA-256 of the source this library was built from (setup.py defines it). */
#ifndef SHAPEFLOW_NORM_ACT_SOURCE
#define SHAPEFLOW_NORM_ACT_SOURCE "unknown"
#endif
const char shapeflow_norm_act_source[] = SHAPEFLOW_NORM_ACT_SOURCE;

/* exp for x <= 0 (kernels.c's exp_nonpositive, down to float32's subnormals as PyTorch's
 * exp): 2^n * e^r, n = round(x / ln 2), r reduced in two exact parts, e^r by its Taylor
 * series to r^7; max error ~2 ulp (subnormal results round once more); 0 below -104. */
static inline float exp_nonpositive(float x) {
    int under = !(x >= -104.0f);
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
    int32_t ni = (int32_t)n, tiny = ni < -126; /* 2^n subnormal: 2^(n + 64) * 2^-64 */
    union { float f; int32_t i; } scale;
    scale.i = ((tiny ? ni + 64 : ni) + 127) << 23;
    float e = p * scale.f;
    e = tiny ? e * 0x1p-64f : e;
    return under ? 0.0f : e;
}

/* sigmoid(x); NaN stays NaN (the caller's products carry it on) */
static inline float sigmoid_f32(float x) {
    float e = exp_nonpositive(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
}

/* out = x * sigmoid(x) */
void silu_f32(const float *restrict x, float *restrict out, ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        float s = sigmoid_f32(x[i]);
        out[i] = x[i] == x[i] ? x[i] * s : x[i];
    }
}

/* dx = g * s * (1 + x * (1 - s)), s = sigmoid(x), multiplied left to right as PyTorch */
void silu_backward_f32(const float *restrict g, const float *restrict x, float *restrict dx,
                       ptrdiff_t n) {
#pragma omp simd
    for (ptrdiff_t i = 0; i < n; i++) {
        float xi = x[i], s = sigmoid_f32(xi);
        float gs = g[i] * (xi == xi ? s : xi);
        dx[i] = gs * (1.0f + xi * (1.0f - s));
    }
}
