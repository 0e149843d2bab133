/* kcheck.h - the comparisons every kernel test makes, in one place: the relative Frobenius
 * error against a float64 or float32 reference, as a TAP check; and, for the CUDA tests, a
 * poisoned device output and its download-and-compare. Header-only (static): each test
 * program is one file. Include after tap.h.
 */
#ifndef PL_TESTS_KCHECK_H
#define PL_TESTS_KCHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ||got - want|| / ||want|| (absolute when want is all zeros); a NaN in got is infinitely far */
static inline double rel_err(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i])) return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* the same against a float32 reference */
static inline double rel_err_ff(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i])) return INFINITY;
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static inline void check_rel(const char *what, const float *got, const double *want, size_t n, double tol) {
    double e = rel_err(got, want, n);
    char name[240];
    snprintf(name, sizeof name, "%s (rel err %.2e <= %.0e)", what, e, tol);
    tap_check(e <= tol, name);
}

/* A device output every element of which the kernel must write (NaN until it does). */
static inline float *dev_poisoned(size_t n) {
    float *d = pl_malloc_floats(n);
    pl_poison(d, n, NULL);
    return d;
}

/* Download d and compare with the CPU reference: relative error within tol, no NaN left. */
static inline void check_dev(const char *what, const float *d, const float *ref, size_t n, double tol) {
    float *h = malloc(n * sizeof(float) + 4);
    pl_device_sync();
    pl_download(h, d, n * sizeof(float));
    double e = rel_err_ff(h, ref, n);
    char name[240];
    snprintf(name, sizeof name, "cuda %s vs cpu reference (rel err %.2e <= %.0e%s)", what, e, tol,
             isinf(e) ? ", UNWRITTEN/NaN elements" : "");
    tap_check(e <= tol, name);
    free(h);
}

#endif
