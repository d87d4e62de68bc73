/* The loss family of the _kernels library: cross entropy, forward and backward. */
#include "kernels_common.h"

/* ---- cross-entropy with class-index targets, no weights, no smoothing ---------------
 * Forward: lse[r] = logsumexp(x[r]) in float64 (m + log(sum exp(x - m)), m the row max);
 * returns the sum over rows whose target is not `ignore` of (m - x[r, t[r]]) + log(sum) in
 * *loss (float64) and their number in *count. The loss never subtracts x[r, t[r]] from a
 * rounded logsumexp: at logits of 1e5 float32's spacing (0.008) would be the loss's error.
 * Rows at `ignore` are left out unread (they may hold NaN or inf: masked padding) with
 * lse 0. Returns -1 when done, or the first row whose target is out of range or whose row
 * max is not finite: the caller's NumPy path then raises (or gives its NaN). */
ptrdiff_t cross_entropy_f32(const float *restrict x, const int64_t *restrict t,
                            double *restrict lse, ptrdiff_t rows, ptrdiff_t n, int64_t ignore,
                            double *loss, ptrdiff_t *count) {
    double total = 0.0;
    ptrdiff_t valid = 0;
    for (ptrdiff_t r = 0; r < rows; r++) {
        const float *row = x + r * n;
        int64_t target = t[r];
        if (target == ignore) {
            lse[r] = 0.0;
            continue;
        }
        if (target < 0 || target >= n) return r;
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
        if (s != s) return r; /* a NaN logit: NumPy's path gives the NaN loss */
        double ls = log((double)s);
        lse[r] = (double)m + ls;
        total += ((double)m - (double)row[target]) + ls;
        valid++;
    }
    *loss = total;
    *count = valid;
    return -1;
}

/* Backward: dx[r] = (softmax(x[r]) - onehot(t[r])) * scale, 0 for ignored rows. lse is
 * split as hi + lo (hi its float32 rounding): exp(x - lse) = exp(x - hi) * exp(-lo), the
 * second factor folded into the row's scale, so the float32 loop loses nothing to hi's
 * rounding and costs what it did. Returns -1, or the first row whose lse is not finite (a
 * forward that NumPy ran on a row with inf or NaN): the caller's NumPy path then gives its
 * NaN, which the exp here would flush to 0. */
ptrdiff_t cross_entropy_backward_f32(const float *restrict x, const int64_t *restrict t,
                                     const double *restrict lse, float *restrict dx,
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
        float hi = (float)lse[r];
        float sc = scale * (float)exp((double)hi - lse[r]);
#pragma omp simd
        for (ptrdiff_t j = 0; j < n; j++) {
            float d = row[j] - hi; /* <= 0: hi >= the row max, which lse is at least */
            o[j] = exp_nonpositive(d > 0.0f ? 0.0f : d) * sc;
        }
        if (target >= 0 && target < n) o[target] -= scale; /* checked in forward */
    }
    return -1;
}
