/* kern_xent.c - softmax cross-entropy: CPU reference and dispatcher. */
#include "kern_xent.h"

#include <math.h>
#include <stddef.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

/* ================================================================================== */
/* CPU reference                                                                       */
/* ================================================================================== */

void kern_xent_forward_ref(float *losses, float *probs, const float *logits, const int *targets,
                           int N, int V) {
    for (int r = 0; r < N; r++) {
        const float *z = logits + (size_t)r * V;
        float *p = probs + (size_t)r * V;
        /* subtracting the max keeps expf from overflowing; the result is unchanged */
        float m = -INFINITY;
        for (int c = 0; c < V; c++) m = z[c] > m ? z[c] : m;
        float sum = 0.0f;
        for (int c = 0; c < V; c++) {
            p[c] = expf(z[c] - m);
            sum += p[c];
        }
        for (int c = 0; c < V; c++) p[c] /= sum;
        /* log-sum-exp form: exact even when probs[target] underflows to 0 */
        losses[r] = logf(sum) + m - z[targets[r]];
    }
}

void kern_xent_backward_ref(float *dlogits, const float *probs, const int *targets, int N, int V) {
    float inv = 1.0f / (float)N;
    for (int r = 0; r < N; r++) {
        const float *p = probs + (size_t)r * V;
        float *d = dlogits + (size_t)r * V;
        for (int c = 0; c < V; c++) d[c] = (p[c] - (c == targets[r] ? 1.0f : 0.0f)) * inv;
    }
}

/* ================================================================================== */
/* Dispatchers                                                                         */
/* ================================================================================== */

void kern_xent_cost(int N, int V, int backward, double *bytes, double *flops) {
    double nv = (double)N * V;
    /* forward: logits read, probs written, targets read, losses written (one expf per
     * logit, one logf per row); backward: probs read, dlogits written, targets read */
    *bytes = backward ? 8.0 * nv + 4.0 * N : 8.0 * nv + 8.0 * N;
    *flops = backward ? 2.0 * nv : (4 + KERN_TRANSCENDENTAL) * nv + KERN_TRANSCENDENTAL * N;
}

KERN_THUNK(xent_forward, kern_xent_forward_ref,
            float *, float *, const float *, const int *, int, int)
KERN_THUNK(xent_backward, kern_xent_backward_ref, float *, const float *, const int *, int, int)

void kern_xent_forward(float *losses, float *probs, const float *logits, const int *targets,
                       int N, int V, pl_stream *s) {
    double bytes, flops;
    kern_xent_cost(N, V, 0, &bytes, &flops);
    KERN_DISPATCH("xent_fwd", bytes, flops,
                  kern_xent_forward_cuda(losses, probs, logits, targets, N, V, s),
                  xent_forward, losses, probs, logits, targets, N, V);
}

void kern_xent_backward(float *dlogits, const float *probs, const int *targets, int N, int V,
                        pl_stream *s) {
    double bytes, flops;
    kern_xent_cost(N, V, 1, &bytes, &flops);
    KERN_DISPATCH("xent_bwd", bytes, flops,
                  kern_xent_backward_cuda(dlogits, probs, targets, N, V, s),
                  xent_backward, dlogits, probs, targets, N, V);
}
