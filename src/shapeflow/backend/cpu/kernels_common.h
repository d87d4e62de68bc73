/* What the family files of the _kernels library (kernels.c, kernels_*.c) share: the
 * headers, the exp they all use and bfloat16's widening (static inline: each file compiles
 * its own copy, as when they were one file), and the bfloat16 conversions of kernels_bf16.c
 * that the bfloat16 forms of the other families call. */
#ifndef SHAPEFLOW_KERNELS_COMMON_H
#define SHAPEFLOW_KERNELS_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* exp for x <= 0 (softmax shifts by the row max first): 2^n * e^r with n = round(x/ln 2),
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

static inline float bf16_widen(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* kernels_bf16.c: float32 <-> bfloat16 (rounded to nearest even, NaN kept NaN) */
void f32_to_bf16(const float *restrict x, uint16_t *restrict out, ptrdiff_t n);
void bf16_to_f32(const uint16_t *restrict x, float *restrict out, ptrdiff_t n);

#endif
