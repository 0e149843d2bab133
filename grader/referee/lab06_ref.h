/* lab06_ref.h - the referee's half of Lab 6: its reference computations, plain functions on
 * host arrays (no MPI, no device, no student code). */
#ifndef LAB06_REF_H
#define LAB06_REF_H

#include "lab06.h"

/* The initial parameters of a case (every rank the same): U(+-1/sqrt(fan-in)) from the
 * counter RNG, concatenated in registration order. */
void l6_weights(float *w, int h, uint64_t seed);

/* What a previous step left in the gradients of accumulate.* (every rank the same). */
void l6_grad0(float *g, int h, uint64_t seed);

/* Single-rank training in float64 on the global batch: `steps` (micro-)steps of `batch`
 * rows each (x [steps * batch][784], y [steps * batch]), from gradients g0 (NULL: zero),
 * accumulating and stepping as the case's kind says (lab6_step_accumulates / _optimizes),
 * SGD with LAB6_LR and momentum. Returns the parameters after the last step
 * (lab6_total(h) doubles, malloc'd). */
double *l6_train(const float *w0, const float *g0, int h, const float *x, const int *y, int kind, int steps, int batch);

/* A fingerprint of n floats' bits. */
uint64_t l6_hash(const float *p, size_t n);

/* The bucketing rule (in whole bytes, as PyTorch counts them): parameters taken in
 * `order`, a bucket closes once its bytes reach its cap (first_mb for bucket 0). */
typedef struct {
    int nbuckets, nparams[LAB6_MAX_PARAMS], params[LAB6_MAX_PARAMS][LAB6_MAX_PARAMS];
} l6_expected;
l6_expected l6_layout_rule(int h, const int *order, double cap_mb, double first_mb);

#endif
