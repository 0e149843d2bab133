/* kern_optim.c - SGD with momentum and AdamW: CPU reference and dispatcher. */
#include "kern_optim.h"

#include <math.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_optim_sgd_ref(float *param, float *mom, const float *grad, size_t n, float lr,
                        float momentum, float weight_decay) {
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] + weight_decay * param[i];
        mom[i] = momentum * mom[i] + g;
        param[i] -= lr * mom[i];
    }
}

void kern_optim_adamw_ref(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int t) {
    /* the bias corrections are per step, not per element: computed once, in double */
    float c1 = (float)(1.0 - pow(beta1, t)), c2 = (float)(1.0 - pow(beta2, t));
    for (size_t i = 0; i < n; i++) {
        float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float p = param[i] - lr * weight_decay * param[i];
        param[i] = p - lr * (m[i] / c1) / (sqrtf(v[i] / c2) + eps);
    }
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_optim_cost(size_t n, int adamw, double *bytes, double *flops) {
    /* SGD: param and momentum read and written, grad read; AdamW: param, m and v read and
     * written, grad read, one sqrtf per element */
    *bytes = (adamw ? 28.0 : 20.0) * (double)n;
    *flops = adamw ? (14 + KERN_TRANSCENDENTAL) * (double)n : 5.0 * (double)n;
}

KERN_THUNK(optim_sgd, kern_optim_sgd_ref,
            float *, float *, const float *, size_t, float, float, float)
KERN_THUNK(optim_adamw, kern_optim_adamw_ref,
            float *, float *, float *, const float *, size_t, float, float, float, float, float,
            int)

void kern_optim_sgd(float *param, float *mom, const float *grad, size_t n, float lr,
                    float momentum, float weight_decay, pl_stream *s) {
    double bytes, flops;
    kern_optim_cost(n, 0, &bytes, &flops);
    KERN_DISPATCH("sgd", bytes, flops,
                  kern_optim_sgd_cuda(param, mom, grad, n, lr, momentum, weight_decay, s),
                  optim_sgd, param, mom, grad, n, lr, momentum, weight_decay);
}

void kern_optim_adamw(float *param, float *m, float *v, const float *grad, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int t,
                      pl_stream *s) {
    double bytes, flops;
    kern_optim_cost(n, 1, &bytes, &flops);
    KERN_DISPATCH("adamw", bytes, flops,
                  kern_optim_adamw_cuda(param, m, v, grad, n, lr, beta1, beta2, eps, weight_decay, t, s),
                  optim_adamw, param, m, v, grad, n, lr, beta1, beta2, eps, weight_decay, t);
}
