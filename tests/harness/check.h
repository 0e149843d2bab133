/* check.h - the comparisons the kernel and model tests make, in one place: the relative
 * Frobenius error against a float64 or float32 reference, as a TAP check; a device buffer
 * downloaded after a sync; a poisoned device output and its download-and-compare; the trace
 * record a kernel leaves. Header-only (static): each test program is one file.
 */
#ifndef PL_TESTS_CHECK_H
#define PL_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pl_instrument.h" // defines: pl_trace_events, pl_trace_count (the harness's record)
#include "pl_rng.h"        // defines: pl_rng_fill_host
#include "tap.h"

/* ||got - want|| / ||want|| (absolute when want is all zeros); a NaN or an infinity in got is
 * infinitely far */
static inline double rel_err(const float *got, const double *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
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
        if (!isfinite(got[i])) return INFINITY;
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

/* the same against a float32 reference */
static inline void check_rel_ff(const char *what, const float *got, const float *want, size_t n, double tol) {
    double e = rel_err_ff(got, want, n);
    char name[240];
    snprintf(name, sizeof name, "%s (rel err %.2e <= %.0e)", what, e, tol);
    tap_check(e <= tol, name);
}

/* n host floats, uniform in [-1, 1), from the counter RNG (seed, id) (free it) */
static inline float *host_uniform(size_t n, uint64_t seed, uint64_t id) {
    float *p = malloc(n * sizeof(float) + 4);
    pl_rng_fill_host(p, 1, (int64_t)n, (int64_t)n, 0, 0, seed, id, PL_RNG_UNIFORM, -1, 1);
    return p;
}

/* A device output every element of which the kernel must write (NaN until it does). */
static inline float *dev_poisoned(size_t n) {
    float *d = pl_malloc_floats(n);
    pl_poison(d, n, NULL);
    return d;
}

/* A host copy of n floats of the device, after the device's work so far (free it). */
static inline float *download(const float *dev, size_t n) {
    float *h = malloc(n * sizeof(float) + 4);
    pl_device_sync();
    pl_download(h, dev, n * sizeof(float));
    return h;
}

/* Download d and compare with the CPU reference: relative error within tol, no NaN left. */
static inline void check_dev(const char *what, const float *d, const float *ref, size_t n, double tol) {
    float *h = download(d, n);
    double e = rel_err_ff(h, ref, n);
    char name[240];
    snprintf(name, sizeof name, "cuda %s vs cpu reference (rel err %.2e <= %.0e%s)", what, e, tol,
             isinf(e) ? ", UNWRITTEN/NaN elements" : "");
    tap_check(e <= tol, name);
    free(h);
}

/* The last trace event is a kernel named `name` with the counts its cost function gives. */
static inline void check_record(const char *name, double bytes, double flops) {
    size_t n = pl_trace_count();
    const pl_trace_event *e = n ? &pl_trace_events()[n - 1] : NULL;
    char what[240];
    snprintf(what, sizeof what, "trace: %s records a kernel with its cost function's bytes (%.0f) and flops (%.0f)",
             name, bytes, flops);
    tap_check(e && e->kind == PL_OP_KERNEL && e->name && !strcmp(e->name, name) && (double)e->bytes == bytes &&
                  e->flops == flops && e->t_end >= e->t_start,
              what);
}

#endif
