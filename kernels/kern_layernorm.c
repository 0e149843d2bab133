/* kern_layernorm.c - layer normalisation: CPU reference and dispatcher. */
#include "kern_layernorm.h"

#include <math.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                                const float *weight, const float *bias, int N, int C,
                                float eps) {
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float m = 0.0f;
        for (int c = 0; c < C; c++) m += x[c];
        m /= (float)C;
        /* two passes: the one-pass E[x^2] - m^2 cancels badly for large means */
        float v = 0.0f;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= (float)C;
        float r = 1.0f / sqrtf(v + eps);
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = r;
    }
}

/* With xhat = (x - m) r and g = dout * weight:
 *   dx = r (g - mean(g) - xhat mean(g xhat)),  dweight += dout xhat,  dbias += dout. */
void kern_layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, const float *mean,
                                 const float *rstd, int N, int C) {
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        float m = mean[i], r = rstd[i];
        float g_mean = 0.0f, gx_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
            g_mean += g;
            gx_mean += g * xhat;
        }
        g_mean /= (float)C;
        gx_mean /= (float)C;
        float *dx = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
            dx[c] = r * (g - g_mean - xhat * gx_mean);
            dweight[c] += dy[c] * xhat;
            dbias[c] += dy[c];
        }
    }
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_layernorm_cost(int N, int C, int backward, double *bytes, double *flops) {
    double nc = (double)N * C;
    /* forward: inp read, out written, weight and bias read, mean and rstd written;
     * backward: dout and inp read, dinp written, dweight and dbias read and written,
     * weight read, mean and rstd read */
    *bytes = backward ? 12.0 * nc + 20.0 * C + 8.0 * N : 8.0 * nc + 8.0 * C + 8.0 * N;
    *flops = backward ? 14.0 * nc : 8.0 * nc + KERN_TRANSCENDENTAL * N;
}

KERN_THUNK(layernorm_forward, kern_layernorm_forward_ref,
            float *, float *, float *, const float *, const float *, const float *, int, int, float)
KERN_THUNK(layernorm_backward, kern_layernorm_backward_ref,
            float *, float *, float *, const float *, const float *, const float *, const float *,
            const float *, int, int)

void kern_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C, float eps,
                            pl_stream *s) {
    double bytes, flops;
    kern_layernorm_cost(N, C, 0, &bytes, &flops);
    KERN_DISPATCH("layernorm_fwd", bytes, flops,
                  kern_layernorm_forward_cuda(out, mean, rstd, inp, weight, bias, N, C, eps, s),
                  layernorm_forward, out, mean, rstd, inp, weight, bias, N, C, eps);
}

void kern_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, const float *mean,
                             const float *rstd, int N, int C, pl_stream *s) {
    double bytes, flops;
    kern_layernorm_cost(N, C, 1, &bytes, &flops);
    KERN_DISPATCH("layernorm_bwd", bytes, flops,
                  kern_layernorm_backward_cuda(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, s),
                  layernorm_backward, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
