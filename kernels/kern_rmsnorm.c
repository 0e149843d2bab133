/* kern_rmsnorm.c - RMS normalisation: CPU reference and dispatcher. */
#include "kern_rmsnorm.h"

#include <math.h>
#include <stddef.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_rmsnorm_forward_ref(float *out, const float *inp, const float *weight, int N, int C,
                              float eps) {
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        /* the sum of squares in double: C = 576 float terms would lose about 1e-6 of it,
         * and this reference is what the CUDA version and the models are measured by */
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = x[c] * r * weight[c];
    }
}

/* ================================================================================== */
/* Dispatcher                                                                          */
/* ================================================================================== */

void kern_rmsnorm_cost(int N, int C, double *bytes, double *flops) {
    double nc = (double)N * C;
    /* inp read and out written, weight read; a square and an add per element for the
     * sum, two products for the scaling, and one sqrt per row */
    *bytes = 8.0 * nc + 4.0 * C;
    *flops = 4.0 * nc + KERN_TRANSCENDENTAL * N;
}

KERN_THUNK(rmsnorm_forward, kern_rmsnorm_forward_ref,
            float *, const float *, const float *, int, int, float)

void kern_rmsnorm_forward(float *out, const float *inp, const float *weight, int N, int C,
                          float eps, pl_stream *s) {
    double bytes, flops;
    kern_rmsnorm_cost(N, C, &bytes, &flops);
    KERN_DISPATCH("rmsnorm_fwd", bytes, flops,
                  kern_rmsnorm_forward_cuda(out, inp, weight, N, C, eps, s),
                  rmsnorm_forward, out, inp, weight, N, C, eps);
}
