/* pl_check.c - comparing results, poisoning outputs, timing. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pl_check.h"      // defines: the API implemented here
#include "pl_instrument.h" // defines: pl_host_allreduce (not counted as the lab's traffic)
#include "pl_runtime.h"    // defines: pl_info, PL_CHECK

pl_compare pl_compare_host(const float *got, const float *expected, size_t n, double abs_tol) {
    pl_compare r = {.n = n};
    double diff2 = 0, ref2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)expected[i];
        int bad;
        if (abs_tol == 0) bad = memcmp(&got[i], &expected[i], sizeof(float)) != 0;
        else bad = isnan(got[i]) || isnan(expected[i]) || fabs(d) > abs_tol;
        if (isnan(got[i])) d = INFINITY;
        if (fabs(d) > r.max_abs || isnan(d)) r.max_abs = fabs(d);
        diff2 += d * d;
        ref2 += (double)expected[i] * expected[i];
        if (bad && r.wrong++ == 0) {
            r.first_wrong = i;
            r.expected = expected[i];
            r.got = got[i];
        }
    }
    r.rel_fro = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    return r;
}

float pl_poison_value(void) {
    /* A quiet NaN with a recognisable payload: unwritten outputs stand out in a dump. */
    uint32_t bits = 0x7FC0DEADu;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

void pl_poison(float *dev, size_t count, pl_stream *s) { pl_fill(dev, pl_poison_value(), count, s); }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

pl_timing pl_time(void (*fn)(void *arg), void *arg, int warmup, int iters, pl_comm *c) {
    PL_CHECK(iters > 0, "pl_time needs at least one iteration");
    for (int i = 0; i < warmup; i++) fn(arg);
    pl_device_sync();
    double *t = malloc((size_t)iters * sizeof *t);
    PL_CHECK(t != NULL, "out of host memory");
    for (int i = 0; i < iters; i++) {
        pl_barrier(c);
        double t0 = pl_now();
        fn(arg);
        pl_device_sync();
        t[i] = (pl_now() - t0) * 1e6;
    }
    /* The slowest rank defines an iteration: reduce each iteration's time with max. */
    pl_host_allreduce(t, iters, PL_HOST_MAX, c);
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    pl_timing r = {.iters = iters, .min_us = t[0], .max_us = t[iters - 1]};
    r.median_us = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    double sum = 0;
    for (int i = 0; i < iters; i++) sum += t[i];
    r.mean_us = sum / iters;
    free(t);
    return r;
}

double pl_time_batch(void (*fn)(void *arg), void *arg, int warmup, int iters, pl_comm *c) {
    PL_CHECK(iters > 0, "pl_time_batch needs at least one iteration");
    for (int i = 0; i < warmup; i++) fn(arg);
    pl_device_sync();
    pl_barrier(c);
    double t0 = pl_now();
    for (int i = 0; i < iters; i++) fn(arg);
    pl_device_sync();
    double us = (pl_now() - t0) * 1e6 / iters;
    pl_host_allreduce(&us, 1, PL_HOST_SUM, c);
    return us / pl_comm_size(c);
}

double pl_tolerance(void) { return pl_info()->tf32 ? 5e-3 : 1e-5; }
const char *pl_tolerance_why(void) {
    return pl_info()->tf32 ? "TF32 GEMMs (PL_TF32=1) keep 10 mantissa bits" : "fp32";
}
