/* kern_clip.c - global-norm clipping and the clipped AdamW step: CPU reference and
 * dispatchers. */
#include "kern_clip.h"

#include <math.h>

#include "pl_bf16.h"       // defines: pl_bf16_from_float, pl_bf16_to_float
#include "kern_dispatch.h" // defines: KERN_DISPATCH, KERN_TRANSCENDENTAL

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_clip_sumsq_ref(float *acc, const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    acc[0] = (float)((double)acc[0] + s);
}

void kern_clip_sumsq_bf16_ref(float *acc, const uint16_t *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = pl_bf16_to_float(x[i]);
        s += v * v;
    }
    acc[0] = (float)((double)acc[0] + s);
}

void kern_clip_coef_ref(float *coef, const float *sumsq, float max_norm) {
    double c = (double)max_norm / (sqrt((double)sumsq[0]) + KERN_CLIP_EPS);
    coef[0] = (float)(c < 1.0 ? c : 1.0);
}

/* One element of AdamW; c1, c2 the bias corrections of step t. */
static inline float adamw_one(float p, float *m, float *v, float g, float lr, float beta1, float beta2,
                              float eps, float weight_decay, float c1, float c2) {
    *m = beta1 * *m + (1.0f - beta1) * g;
    *v = beta2 * *v + (1.0f - beta2) * g * g;
    p -= lr * weight_decay * p;
    return p - lr * (*m / c1) / (sqrtf(*v / c2) + eps);
}

void kern_clip_adamw_ref(float *param, float *m, float *v, const float *grad, const float *coef,
                         size_t n, float lr, float beta1, float beta2, float eps, float weight_decay,
                         int t) {
    /* the bias corrections are per step, not per element: computed once, in double */
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t)), k = coef[0];
    for (size_t i = 0; i < n; i++)
        param[i] = adamw_one(param[i], &m[i], &v[i], k * grad[i], lr, beta1, beta2, eps, weight_decay, c1, c2);
}

void kern_clip_adamw_bf16_ref(float *master, float *m, float *v, const uint16_t *grad,
                              const float *coef, uint16_t *param_out, size_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, int t) {
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t)), k = coef[0];
    for (size_t i = 0; i < n; i++) {
        master[i] = adamw_one(master[i], &m[i], &v[i], k * pl_bf16_to_float(grad[i]), lr, beta1, beta2, eps,
                              weight_decay, c1, c2);
        param_out[i] = pl_bf16_from_float(master[i]);
    }
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_clip_cost(size_t n, int which, double *bytes, double *flops) {
    double N = (double)n;
    switch (which) {
    case 0: *bytes = 4.0 * N + 8.0, *flops = 2.0 * N; break;  /* read x, acc read and written */
    case 1: *bytes = 2.0 * N + 8.0, *flops = 2.0 * N; break;
    case 2: *bytes = 8.0, *flops = 3.0 + KERN_TRANSCENDENTAL; break;
    case 3: *bytes = 28.0 * N + 4.0, *flops = (15 + KERN_TRANSCENDENTAL) * N; break; /* kern_optim's + the scale */
    default: *bytes = 28.0 * N + 4.0, *flops = (16 + KERN_TRANSCENDENTAL) * N; break; /* + the rounding */
    }
}

/* what a deferred stream keeps of each CPU reference's arguments (kern_dispatch.h) */
KERN_THUNK(kern_clip_sumsq_ref, kern_clip_sumsq_ref, float *, const float *, size_t)
KERN_THUNK(kern_clip_sumsq_bf16_ref, kern_clip_sumsq_bf16_ref, float *, const uint16_t *, size_t)
KERN_THUNK(kern_clip_coef_ref, kern_clip_coef_ref, float *, const float *, float)
KERN_THUNK(kern_clip_adamw_ref, kern_clip_adamw_ref, float *, float *, float *, const float *, const float *, size_t, float, float, float, float, float, int)
KERN_THUNK(kern_clip_adamw_bf16_ref, kern_clip_adamw_bf16_ref, float *, float *, float *, const uint16_t *, const float *, uint16_t *, size_t, float, float, float, float, float, int)

void kern_clip_sumsq(float *acc, const float *x, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_clip_cost(n, 0, &bytes, &flops);
    KERN_DISPATCH("clip_sumsq", bytes, flops, kern_clip_sumsq_cuda(acc, x, n, s), kern_clip_sumsq_ref, acc, x, n);
}

void kern_clip_sumsq_bf16(float *acc, const uint16_t *x, size_t n, pl_stream *s) {
    double bytes, flops;
    kern_clip_cost(n, 1, &bytes, &flops);
    KERN_DISPATCH("clip_sumsq_bf16", bytes, flops, kern_clip_sumsq_bf16_cuda(acc, x, n, s),
                  kern_clip_sumsq_bf16_ref, acc, x, n);
}

void kern_clip_coef(float *coef, const float *sumsq, float max_norm, pl_stream *s) {
    double bytes, flops;
    kern_clip_cost(1, 2, &bytes, &flops);
    KERN_DISPATCH("clip_coef", bytes, flops, kern_clip_coef_cuda(coef, sumsq, max_norm, s),
                  kern_clip_coef_ref, coef, sumsq, max_norm);
}

void kern_clip_adamw(float *param, float *m, float *v, const float *grad, const float *coef, size_t n,
                     float lr, float beta1, float beta2, float eps, float weight_decay, int t, pl_stream *s) {
    double bytes, flops;
    kern_clip_cost(n, 3, &bytes, &flops);
    KERN_DISPATCH("clip_adamw", bytes, flops,
                  kern_clip_adamw_cuda(param, m, v, grad, coef, n, lr, beta1, beta2, eps, weight_decay, t, s),
                  kern_clip_adamw_ref, param, m, v, grad, coef, n, lr, beta1, beta2, eps, weight_decay, t);
}

void kern_clip_adamw_bf16(float *master, float *m, float *v, const uint16_t *grad, const float *coef,
                          uint16_t *param_out, size_t n, float lr, float beta1, float beta2, float eps,
                          float weight_decay, int t, pl_stream *s) {
    double bytes, flops;
    kern_clip_cost(n, 4, &bytes, &flops);
    KERN_DISPATCH("clip_adamw_bf16", bytes, flops,
                  kern_clip_adamw_bf16_cuda(master, m, v, grad, coef, param_out, n, lr, beta1, beta2, eps,
                                            weight_decay, t, s),
                  kern_clip_adamw_bf16_ref, master, m, v, grad, coef, param_out, n, lr, beta1, beta2, eps,
                                           weight_decay, t);
}
