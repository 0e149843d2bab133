/* kern_softmax.c - causal softmax: CPU reference and dispatcher. */
#include "kern_softmax.h"

#include <math.h>

#include "kern_dispatch.h" // defines: KERN_DISPATCH (run on the backend, record for the trace)

void kern_softmax_forward_ref(float *probs, const float *scores, int R, int T, float scale) {
    for (long row = 0; row < (long)R * T; row++) {
        int t = (int)(row % T);
        const float *x = scores + row * T;
        float *p = probs + row * T;
        float mx = -INFINITY;
        for (int j = 0; j <= t; j++) mx = fmaxf(mx, scale * x[j]);
        float sum = 0.0f;
        for (int j = 0; j <= t; j++) {
            p[j] = expf(scale * x[j] - mx);
            sum += p[j];
        }
        for (int j = 0; j <= t; j++) p[j] /= sum;
        for (int j = t + 1; j < T; j++) p[j] = 0.0f;
    }
}

void kern_softmax_backward_ref(float *dscores, const float *dprobs, const float *probs, int R,
                               int T, float scale) {
    for (long row = 0; row < (long)R * T; row++) {
        int t = (int)(row % T);
        const float *p = probs + row * T, *dp = dprobs + row * T;
        float *ds = dscores + row * T;
        float dot = 0.0f;
        for (int j = 0; j <= t; j++) dot += p[j] * dp[j];
        for (int j = 0; j <= t; j++) ds[j] = scale * p[j] * (dp[j] - dot);
        for (int j = t + 1; j < T; j++) ds[j] = 0.0f;
    }
}

void kern_softmax_cost(int R, int T, int backward, double *bytes, double *flops) {
    double all = (double)R * T * T, causal = (double)R * T * (T + 1) / 2.0;
    /* every score is read and written (the masked half as zeros); the arithmetic, with
     * one expf per kept score forward, covers only the causal half */
    *bytes = (backward ? 12.0 : 8.0) * all;
    *flops = backward ? 5.0 * causal : (4 + KERN_TRANSCENDENTAL) * causal;
}

KERN_THUNK(softmax_forward, kern_softmax_forward_ref, float *, const float *, int, int, float)
KERN_THUNK(softmax_backward, kern_softmax_backward_ref,
            float *, const float *, const float *, int, int, float)

void kern_softmax_forward(float *probs, const float *scores, int R, int T, float scale,
                          pl_stream *s) {
    double bytes, flops;
    kern_softmax_cost(R, T, 0, &bytes, &flops);
    KERN_DISPATCH("softmax_fwd", bytes, flops,
                  kern_softmax_forward_cuda(probs, scores, R, T, scale, s),
                  softmax_forward, probs, scores, R, T, scale);
}

void kern_softmax_backward(float *dscores, const float *dprobs, const float *probs, int R, int T,
                           float scale, pl_stream *s) {
    double bytes, flops;
    kern_softmax_cost(R, T, 1, &bytes, &flops);
    KERN_DISPATCH("softmax_bwd", bytes, flops,
                  kern_softmax_backward_cuda(dscores, dprobs, probs, R, T, scale, s),
                  softmax_backward, dscores, dprobs, probs, R, T, scale);
}
