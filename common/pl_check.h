/* pl_check.h - comparing results, poisoning outputs, timing ops. */
#ifndef PL_CHECK_H
#define PL_CHECK_H

#include <stddef.h>

#include "pl_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t n;           /* elements compared                                     */
    size_t wrong;       /* elements outside the tolerance (bitwise when tol = 0) */
    size_t first_wrong; /* index of the first one, valid when wrong > 0          */
    float expected, got;/* values at first_wrong                                 */
    double max_abs;     /* max |got - expected|                                  */
    double rel_fro;     /* ||got - expected||_F / ||expected||_F (0 if both 0)   */
} pl_compare;

/* Host arrays. An element is wrong when |got - expected| > abs_tol, or when the two
 * are not bit-identical if abs_tol == 0 (NaN is always wrong). */
pl_compare pl_compare_host(const float *got, const float *expected, size_t n, double abs_tol);

/* Fill with a signalling pattern (a NaN payload) so unwritten outputs are caught. */
void pl_poison(float *dev, size_t count, pl_stream *s);
float pl_poison_value(void);

/* Timing: run fn `warmup` times, then `iters` times, each iteration bracketed by a device
 * sync, and report per-iteration statistics in microseconds. Times are reduced across
 * the ranks of `c` with max, so every rank returns the same numbers. */
typedef struct {
    double median_us, min_us, max_us, mean_us;
    int iters;
} pl_timing;
pl_timing pl_time(void (*fn)(void *arg), void *arg, int warmup, int iters, pl_comm *c);
/* nccl-tests' time of one iteration: `iters` calls back to back, one sync at the end, the
 * total divided by iters, averaged over the ranks of c (microseconds). */
double pl_time_batch(void (*fn)(void *arg), void *arg, int warmup, int iters, pl_comm *c);

/* The tolerance of a float result against a float64 reference, as relative Frobenius
 * error: 1e-5 when GEMMs are exact fp32, 5e-3 when they run in TF32 (cuda with
 * PL_TF32=1). Decided here, once, for every check of the kit; and why, in words. */
double pl_tolerance(void);
const char *pl_tolerance_why(void);

#ifdef __cplusplus
}
#endif

#endif
