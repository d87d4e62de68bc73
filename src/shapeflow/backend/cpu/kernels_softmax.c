/* The softmax family of the _kernels library: softmax over rows and its backward (float32),
 * softmax and log_softmax on bfloat16 rows. exp_nonpositive is in kernels_common.h. */
#include <stdlib.h>

#include "kernels_common.h"

/* ---- softmax over rows ------------------------------------------------------------- */
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
